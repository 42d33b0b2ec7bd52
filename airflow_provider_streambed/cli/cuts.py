"""``streambed cuts list|show|verify``: inspect the published cuts of a group.

Friendly tables by default, ``--json`` for scripts; ``verify`` exits non-zero when a member
snapshot of a cut is missing or does not carry the cut's id and W.
"""

from __future__ import annotations

import argparse
import json
import logging
from typing import Any

from airflow_provider_streambed.cli import add_catalog_arguments, add_group_argument, group_name
from airflow_provider_streambed.exceptions import CutNotFoundError, DeclarationError
from airflow_provider_streambed.read import Cut, CutReader

logger = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``streambed cuts``."""
    parser.add_argument("action", choices=("list", "show", "verify"), help="what to do")
    add_group_argument(parser, name_will_do=True)
    add_catalog_arguments(parser)
    parser.add_argument("--cut", type=int, default=None, help="cut number (default: the latest)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _summary(cut: Cut) -> dict[str, Any]:
    return {
        "cut_id": cut.cut_id,
        "watermark": str(cut.watermark),
        "prev_watermark": None if cut.prev_watermark is None else str(cut.prev_watermark),
        "published_at": cut.published_at.isoformat(),
        "run_key": cut.run_key,
    }


def table(headers: list[str], rows: list[list[Any]]) -> str:
    """A plain text table: the headers, a rule, then the rows, columns padded to their widest cell."""
    cells = [headers, *[[str(value) for value in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(value.ljust(width) for value, width in zip(row, widths, strict=True)) for row in cells]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(line.rstrip() for line in lines)


def _show(cut: Cut) -> dict[str, Any]:
    counts = cut.row_counts()
    members = [
        {"member": name, "table": m.table_identifier, "snapshot_id": m.snapshot_id, "rows": counts[name],
         "metadata_location": m.metadata_location}
        for name, m in sorted(cut.members.items())
    ]
    return {**_summary(cut), "members": members}


def run(args: argparse.Namespace) -> int:
    """Handle ``streambed cuts``; returns the exit code."""
    try:
        reader = CutReader({"uri": args.catalog_uri, "warehouse": args.warehouse}, group_name(args.group))
        if args.action == "list":
            cuts = [_summary(cut) for cut in reader.list()]
            status = reader.status()
            if args.json:
                checked = None if status.checked_at is None else status.checked_at.isoformat()
                print(json.dumps({"cuts": cuts, "source_checked_at": checked, "checked_by": status.checked_by},
                                 indent=1))
                return 0
            headers = ["cut_id", "watermark", "prev_watermark", "published_at", "run_key"]
            print(status.message())
            print(table(headers, [[c[h] for h in headers] for c in cuts]))
            return 0
        cut = reader.latest() if args.cut is None else reader.get(args.cut)
    except (CutNotFoundError, DeclarationError) as error:
        print(json.dumps({"error": str(error)}) if args.json else f"error: {error}")
        return 2
    if args.action == "show":
        shown = _show(cut)
        if args.json:
            print(json.dumps(shown, indent=1))
        else:
            print(f"group {reader.group} cut {cut.cut_id}  W={cut.watermark}  previous W={cut.prev_watermark}  "
                  f"published {shown['published_at']}  run {cut.run_key}")
            headers = ["member", "table", "snapshot_id", "rows"]
            print(table(headers, [[m[h] for h in headers] for m in shown["members"]]))
        return 0
    problems = cut.verify()
    if args.json:
        print(json.dumps({**_summary(cut), "ok": not problems, "problems": problems}, indent=1))
    elif problems:
        print(f"group {reader.group} cut {cut.cut_id} (W={cut.watermark}): FAILED")
        print("\n".join(f"  {problem}" for problem in problems))
    else:
        verified = len(cut.members)
        print(f"group {reader.group} cut {cut.cut_id} (W={cut.watermark}): OK, {verified} member snapshots verified")
    return 1 if problems else 0
