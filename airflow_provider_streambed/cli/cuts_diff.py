"""``streambed cuts diff --group G A B``: what changed in each member from cut A to cut B.

Prints, per member, the rows removed and added (net) and how they were found (``snapshots``, or
``full diff`` with the reason); ``--output DIR`` writes each member's changes as
``DIR/<member>/removed.parquet`` and ``DIR/<member>/added.parquet``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from airflow_provider_streambed.exceptions import DeclarationError
from airflow_provider_streambed.read import CutReader
from airflow_provider_streambed.read.feed import MemberChanges


def cut_range(targets: list[str]) -> tuple[int, int]:
    """The two cut numbers of ``cuts diff A B``.

    Raises:
        DeclarationError: not exactly two cut numbers.
    """
    if len(targets) != 2 or not all(target.isdigit() for target in targets):
        raise DeclarationError(f"cuts diff: name two cut numbers (cuts diff --group G A B), got {targets}")
    return int(targets[0]), int(targets[1])


def _summary(change: MemberChanges) -> dict[str, Any]:
    return {"member": change.member, "removed": change.removed.num_rows, "added": change.added.num_rows,
            "method": change.method, "reason": change.reason}


def write_changes(changes: dict[str, MemberChanges], output: Path) -> None:
    """Each member's ``removed`` and ``added`` rows as Parquet under ``output/<member>/``."""
    for name, change in changes.items():
        (output / name).mkdir(parents=True, exist_ok=True)
        pq.write_table(change.removed, output / name / "removed.parquet")
        pq.write_table(change.added, output / name / "added.parquet")


def diff_report(reader: CutReader, targets: list[str], output: str | None) -> dict[str, Any]:
    """The changes from cut A to cut B (``targets``) per member, for printing; with ``output``,
    written as Parquet there too.

    Raises:
        DeclarationError: ``targets`` are not two cut numbers.
        CutNotFoundError: either cut does not exist or expired (the message says when).
        ChangeFeedError: A is later than B.
    """
    first, second = cut_range(targets)
    earlier, later = reader.get(first), reader.get(second)
    changes = later.changes_since(earlier, reader.ledger)
    if output:
        write_changes(changes, Path(output))
    return {"group": reader.group, "from_cut": first, "to_cut": second, "since": str(earlier.watermark),
            "until": str(later.watermark), "members": [_summary(change) for change in changes.values()]}
