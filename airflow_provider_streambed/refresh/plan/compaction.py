"""Compaction: which merge-on-read mirrors a run rewrites whole, to bound read amplification.

Every incremental run of a mirror adds a small data file of new images and a position-delete
file; readers then open more files and skip deleted rows. A mirror is due for compaction when its
deleted rows exceed ``compact_deleted_ratio`` of its live rows or its snapshot has more than
``compact_max_files`` small files (under :data:`SMALL_FILE_BYTES`; a whole write aims at 128 MiB
files, so a large mirror is not due again right after its compaction), both set per
:class:`~airflow_provider_streambed.member_declarations.Mirror`.
A due mirror that the run computes anyway is rewritten whole in the same cut; by default
(``compact="auto"``) at most one per run, the most amplified first, so one run never pays for
rewriting every table. ``compact="all"`` rewrites every due mirror, ``"none"`` none. A mirror
that does not change is carried as it is, due or not.

Pure functions: the plan reads the figures from the previous cut's snapshot summary and planned files.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.exceptions import DeclarationError
from airflow_provider_streambed.member_declarations import Mirror

Compact = Literal["auto", "all", "none"]
COMPACT_MODES: tuple[Compact, ...] = ("auto", "all", "none")
#: A data or delete file below this size counts toward ``compact_max_files``.
SMALL_FILE_BYTES = 32 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class SnapshotStorage:
    """How a member snapshot is stored.

    Attributes:
        records: rows in its data files, deleted ones included.
        deleted: position-deleted rows.
        small_files: data and delete files under :data:`SMALL_FILE_BYTES`.
    """

    records: int = 0
    deleted: int = 0
    small_files: int = 0

    @classmethod
    def of(cls, summary: Mapping[str, str], sizes: Iterable[int]) -> SnapshotStorage:
        """From a snapshot summary (``total-records``, ``total-position-deletes``; missing: 0) and
        the sizes of its files."""
        return cls(
            int(summary.get("total-records", "0")),
            int(summary.get("total-position-deletes", "0")),
            sum(1 for size in sizes if size < SMALL_FILE_BYTES),
        )

    @property
    def deleted_ratio(self) -> float:
        """Deleted rows per live row (0 for an empty snapshot without deletes)."""
        live = self.records - self.deleted
        return self.deleted / live if live > 0 else float(self.deleted > 0)


def due_reason(mirror: Mirror, storage: SnapshotStorage) -> str | None:
    """Why ``mirror`` is due for compaction, or ``None``."""
    if storage.deleted_ratio > mirror.compact_deleted_ratio:
        return (f"compaction: {storage.deleted} deleted rows are {storage.deleted_ratio:.1%} of the live rows "
                f"(threshold {mirror.compact_deleted_ratio:.1%})")
    if storage.small_files > mirror.compact_max_files:
        return f"compaction: {storage.small_files} small files (threshold {mirror.compact_max_files})"
    return None


def choose_compactions(
    group: RefreshGroup, storage: Mapping[str, SnapshotStorage], computed: Collection[str], compact: str = "auto"
) -> dict[str, str]:
    """The mirrors to rewrite whole this run, with the reason.

    Args:
        group: the group.
        storage: per member in the previous cut, how its snapshot is stored.
        computed: the members the run computes (a carried member is never compacted).
        compact: ``"auto"`` (at most one, the most amplified), ``"all"`` or ``"none"``.

    Raises:
        DeclarationError: ``compact`` is not one of ``auto``, ``all``, ``none``.
    """
    if compact not in COMPACT_MODES:
        raise DeclarationError(f"group {group.name!r}: compact={compact!r}; expected one of {list(COMPACT_MODES)}")
    if compact == "none":
        return {}
    due = {
        mirror.name: (reason, _amplification(mirror, storage[mirror.name]))
        for mirror in group.mirrors
        if mirror.name in computed and mirror.name in storage
        and (reason := due_reason(mirror, storage[mirror.name])) is not None
    }
    ranked = sorted(due, key=lambda name: (-due[name][1], name))
    return {name: due[name][0] for name in (ranked if compact == "all" else ranked[:1])}


def _amplification(mirror: Mirror, storage: SnapshotStorage) -> float:
    """How far past its thresholds a mirror is (the larger of the two ratios)."""
    return max(storage.deleted_ratio / mirror.compact_deleted_ratio, storage.small_files / mirror.compact_max_files)
