"""``streambed refresh``: one run of a declared group in this process (``refresh_once``).

The group is named as ``path/to/file.py:variable`` or ``package.module:variable``. The source
DSN is read from an environment variable (default ``STREAMBED_SOURCE_DSN``), never from the
command line, where other users of the machine could read it.
"""

from __future__ import annotations

import argparse
import json
import logging
import os

from airflow_provider_streambed.cli import load_group
from airflow_provider_streambed.exceptions import StreambedError
from airflow_provider_streambed.lsn import Lsn

logger = logging.getLogger(__name__)

DSN_VARIABLE = "STREAMBED_SOURCE_DSN"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``streambed refresh``."""
    parser.add_argument("group", help="the declaration: path/to/file.py:variable or package.module:variable")
    parser.add_argument("--catalog-uri", required=True, help="SQLAlchemy URI of the catalog database")
    parser.add_argument("--warehouse", required=True, help="warehouse URI, e.g. file:///data/warehouse")
    parser.add_argument("--source-dsn-env", default=DSN_VARIABLE,
                        help=f"environment variable holding the source DSN (default {DSN_VARIABLE})")
    parser.add_argument("--run-key", default=None, help="retry this run (default: a new run)")
    parser.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    parser.add_argument("--watermark", default=None, help="pin this W explicitly, e.g. 0/16B3748")
    parser.add_argument("--supersede-pending", action="store_true", help="abandon another unpublished run")
    parser.add_argument("--json", action="store_true", help="print the cut as JSON")


def run(args: argparse.Namespace) -> int:
    """Handle ``streambed refresh``; returns the exit code."""
    from airflow_provider_streambed.local import refresh_once

    dsn = os.environ.get(args.source_dsn_env)
    if not dsn:
        print(f"error: set the source DSN in the environment variable {args.source_dsn_env}")
        return 2
    try:
        group = load_group(args.group)
        result = refresh_once(
            group,
            source_dsn=dsn,
            catalog_properties={"uri": args.catalog_uri, "warehouse": args.warehouse},
            run_key=args.run_key,
            master=args.master,
            explicit_watermark=Lsn.parse(args.watermark) if args.watermark else None,
            supersede_pending_runs=args.supersede_pending,
        )
    except StreambedError as error:
        print(f"error: {error}")
        return 1
    cut = result.cut
    facts = {"group": cut.group, "outcome": str(result.outcome), "cut_id": cut.cut_id,
             "watermark": str(cut.watermark), "run_key": result.run_key, "checked_at": result.checked_at.isoformat(),
             "members": sorted(cut.members)}
    print(json.dumps(facts, indent=1) if args.json else result.message())
    return 0
