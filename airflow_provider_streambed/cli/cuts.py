"""``streambed cuts list|show|verify|diff|pin|unpin|expire``: inspect and keep a group's published cuts.

Friendly tables by default, ``--json`` for scripts; ``verify`` exits non-zero when a member
snapshot of a cut is missing or does not carry the cut's id and W. ``pin`` and ``unpin`` take
the group and cut as ``--group``/``--cut`` or positionally (``streambed cuts pin bank 42``);
``expire`` applies the group's retention (it needs the declaration, which holds the retention)
and ``--dry-run`` shows what would go. ``diff --group G A B`` prints what changed in each member
from cut A to cut B (:mod:`.cuts_diff`).
"""

from __future__ import annotations

import argparse
import json
import logging
from typing import Any

from pyiceberg.catalog.sql import SqlCatalog

from airflow_provider_streambed.cli import add_catalog_arguments, add_group_argument, group_name, load_group
from airflow_provider_streambed.cli.cuts_diff import diff_report
from airflow_provider_streambed.exceptions import ChangeFeedError, CutNotFoundError, DeclarationError, PublishError
from airflow_provider_streambed.read import Cut, CutReader

logger = logging.getLogger(__name__)

ACTIONS = ("list", "show", "verify", "diff", "pin", "unpin", "expire")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``streambed cuts``."""
    parser.add_argument("action", choices=ACTIONS, help="what to do")
    parser.add_argument("target", nargs="*", metavar="GROUP CUT",
                        help="pin/unpin: the group and cut, instead of --group and --cut; diff: cuts A and B")
    add_group_argument(parser, name_will_do=True, required=False)
    add_catalog_arguments(parser)
    parser.add_argument("--cut", type=int, default=None, help="cut number (default: the latest)")
    parser.add_argument("--dry-run", action="store_true", help="expire: show what would go, change nothing")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--output", default=None, metavar="DIR",
                        help="diff: also write each member's changes as DIR/<member>/removed.parquet and added.parquet")


def _summary(cut: Cut) -> dict[str, Any]:
    return {
        "cut_id": cut.cut_id,
        "watermark": str(cut.watermark),
        "prev_watermark": None if cut.prev_watermark is None else str(cut.prev_watermark),
        "published_at": cut.published_at.isoformat(),
        "run_key": cut.run_key,
        "pinned": cut.pinned_at is not None,
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


def _targets(args: argparse.Namespace) -> tuple[str, int | None]:
    """The group reference and cut number from ``--group``/``--cut`` or the positional ``GROUP CUT``.

    Raises:
        DeclarationError: no group, too many positionals, or a cut that is not a number.
    """
    positional = list(args.target)
    if args.action == "diff":
        if args.group is None:
            raise DeclarationError("cuts diff: name the group (--group)")
        return args.group, None
    if len(positional) > 2 or (positional and args.action not in ("pin", "unpin")):
        raise DeclarationError(f"cuts {args.action}: unexpected arguments {positional}")
    group = args.group or (positional.pop(0) if positional else None)
    if group is None:
        raise DeclarationError(f"cuts {args.action}: name the group (--group)")
    if positional and not positional[0].isdigit():
        raise DeclarationError(f"cuts {args.action}: cut {positional[0]!r} is not a cut number")
    return group, int(positional[0]) if positional else args.cut


def run(args: argparse.Namespace) -> int:
    """Handle ``streambed cuts``; returns the exit code."""
    try:
        reference, cut_id = _targets(args)
        reader = CutReader({"uri": args.catalog_uri, "warehouse": args.warehouse}, group_name(reference))
        if args.action == "list":
            return _list(reader, args.json)
        if args.action == "diff":
            return _print_diff(diff_report(reader, list(args.target), args.output), args.json)
        if args.action == "expire":
            return _expire(reader, reference, args)
        if args.action in ("pin", "unpin"):
            if cut_id is None:
                raise DeclarationError(f"cuts {args.action}: name the cut (--cut N or GROUP CUT)")
            cut = Cut.from_record(reader.ledger.pin_cut(reader.group, cut_id, args.action == "pin"), reader.catalog)
            print(json.dumps(_summary(cut)) if args.json else
                  f"group {reader.group} cut {cut.cut_id}: {'pinned' if cut.pinned_at else 'not pinned'}")
            return 0
        cut = reader.latest() if cut_id is None else reader.get(cut_id)
    except (ChangeFeedError, CutNotFoundError, DeclarationError, PublishError) as error:
        print(json.dumps({"error": str(error)}) if args.json else f"error: {error}")
        return 2
    if args.action == "show":
        return _print_show(reader, cut, args.json)
    return _verify(reader, cut, args.json)


def _list(reader: CutReader, as_json: bool) -> int:
    cuts = [_summary(cut) for cut in reader.list()]
    status = reader.status()
    if as_json:
        checked = None if status.checked_at is None else status.checked_at.isoformat()
        print(json.dumps({"cuts": cuts, "source_checked_at": checked, "checked_by": status.checked_by}, indent=1))
        return 0
    headers = ["cut_id", "watermark", "prev_watermark", "published_at", "run_key", "pinned"]
    print(status.message())
    print(table(headers, [[c[h] if h != "pinned" else ("pinned" if c[h] else "") for h in headers] for c in cuts]))
    return 0


def _expire(reader: CutReader, reference: str, args: argparse.Namespace) -> int:
    from airflow_provider_streambed.retention.maintenance import apply_retention

    if ":" not in reference:
        raise DeclarationError("cuts expire: --group must name the declaration (path/to/file.py:variable or "
                               "module:variable), which holds the retention")
    if not isinstance(reader.catalog, SqlCatalog):
        raise DeclarationError(f"cuts expire: catalog {reader.catalog.name!r} is not a SQL catalog")
    report = apply_retention(reader.catalog, reader.ledger, load_group(reference), dry_run=args.dry_run)
    summary = {**report.summary(), "dry_run": args.dry_run}
    if args.json:
        print(json.dumps(summary, indent=1))
        return 0
    verb = "would expire" if args.dry_run else "expired"
    print(f"group {reader.group}: {verb} cuts {summary['expired_cuts'] or 'none'}; "
          f"{'would delete' if args.dry_run else 'deleted'} {summary['deleted_files']} files, "
          f"{summary['pending_files']} unreferenced files wait for delete_files_after")
    return 0


def _print_show(reader: CutReader, cut: Cut, as_json: bool) -> int:
    shown = _show(cut)
    if as_json:
        print(json.dumps(shown, indent=1))
        return 0
    pinned = "  pinned" if cut.pinned_at else ""
    print(f"group {reader.group} cut {cut.cut_id}  W={cut.watermark}  previous W={cut.prev_watermark}  "
          f"published {shown['published_at']}  run {cut.run_key}{pinned}")
    headers = ["member", "table", "snapshot_id", "rows"]
    print(table(headers, [[m[h] for h in headers] for m in shown["members"]]))
    return 0


def _verify(reader: CutReader, cut: Cut, as_json: bool) -> int:
    problems = cut.verify()
    if as_json:
        print(json.dumps({**_summary(cut), "ok": not problems, "problems": problems}, indent=1))
    elif problems:
        print(f"group {reader.group} cut {cut.cut_id} (W={cut.watermark}): FAILED")
        print("\n".join(f"  {problem}" for problem in problems))
    else:
        verified = len(cut.members)
        print(f"group {reader.group} cut {cut.cut_id} (W={cut.watermark}): OK, {verified} member snapshots verified")
    return 1 if problems else 0


def _print_diff(report: dict[str, Any], as_json: bool) -> int:
    if as_json:
        print(json.dumps(report, indent=1))
        return 0
    print(f"group {report['group']}: cut {report['from_cut']} -> cut {report['to_cut']}: the transactions with "
          f"commit LSN in [{report['since']}, {report['until']})")
    headers = ["member", "removed", "added", "method", "reason"]
    print(table(headers, [[row[h] for h in headers] for row in report["members"]]))
    return 0
