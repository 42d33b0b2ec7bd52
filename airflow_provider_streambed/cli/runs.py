"""``streambed runs list|supersede``: see a group's runs and free a group from a run by hand.

``list`` shows each run's key, state, W, pin time, cut, outcome and the class of its last
failure; ``supersede`` abandons an unpublished run (it can then never publish), which is what
the trigger-form Param ``supersede_pending_runs`` does from the Airflow UI.
"""

from __future__ import annotations

import argparse
import json
import logging
from typing import Any

from airflow_provider_streambed.cli import add_catalog_arguments, add_group_argument, group_name
from airflow_provider_streambed.cli.cuts import table
from airflow_provider_streambed.exceptions import DeclarationError, LedgerError
from airflow_provider_streambed.ledger import Ledger, RunRecord, RunState
from airflow_provider_streambed.ledger.claims import supersede_run

logger = logging.getLogger(__name__)

HEADERS = ["run_key", "state", "watermark", "pinned_at", "cut", "outcome", "last_error"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``streambed runs``."""
    parser.add_argument("action", choices=("list", "supersede"), help="what to do")
    parser.add_argument("run_key", nargs="?", default=None, help="the run to supersede")
    add_group_argument(parser, name_will_do=True)
    add_catalog_arguments(parser, warehouse_required=False)
    parser.add_argument("--limit", type=int, default=50, help="list at most this many runs, newest first")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def outcome(run: RunRecord) -> str:
    """What a run came to, in words."""
    if run.state == RunState.PUBLISHED:
        return f"published cut {run.cut_id}"
    if run.state == RunState.UNCHANGED:
        return f"unchanged since cut {run.cut_id}"
    if run.replaced_by is not None:
        return f"replaced by {run.replaced_by}"
    if run.state == RunState.FAILED:
        return "failed, resumable until a new run starts"
    return "superseded" if run.state == RunState.SUPERSEDED else "pending"


def describe(run: RunRecord) -> dict[str, Any]:
    """A run as JSON-able facts."""
    return {
        "run_key": run.run_key,
        "state": run.state.value,
        "watermark": str(run.watermark),
        "pinned_at": run.pinned_at.isoformat(timespec="seconds"),
        "cut": run.cut_id,
        "outcome": outcome(run),
        "last_error": run.last_error,
        "dag_id": run.dag_run.dag_id if run.dag_run else None,
        "dag_run_id": run.dag_run.run_id if run.dag_run else None,
    }


def run(args: argparse.Namespace) -> int:
    """Handle ``streambed runs``; returns the exit code."""
    if args.catalog_uri is None:
        print("error: pass --catalog-uri, the catalog database the ledger lives in")
        return 2
    try:
        group = group_name(args.group)
    except DeclarationError as error:
        print(f"error: {error}")
        return 2
    ledger = Ledger(args.catalog_uri)
    ledger.create()
    if args.action == "list":
        runs = [describe(record) for record in ledger.list_runs(group, args.limit)]
        if args.json:
            print(json.dumps(runs, indent=1))
        else:
            rows = [["-" if row[h] is None else row[h] for h in HEADERS] for row in runs]
            print(table(HEADERS, rows))
        return 0
    if args.run_key is None:
        print("error: name the run to supersede: streambed runs supersede --group G RUN_KEY")
        return 2
    try:
        record = supersede_run(ledger, group, args.run_key)
    except LedgerError as error:
        print(f"error: {error}")
        return 1
    print(f"group {group}: run {record.run_key} (W={record.watermark}) superseded; the next run starts a new W")
    return 0
