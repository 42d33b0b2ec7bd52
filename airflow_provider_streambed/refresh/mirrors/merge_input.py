"""What a mirror's merge reads: the record both merges take (Spark's and the in-process one), without pyspark."""

from __future__ import annotations

from dataclasses import dataclass, field

from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.exceptions import MirrorDivergedError, resync_member_fix
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.member_declarations import Mirror
from airflow_provider_streambed.staging import JobSpec, SnapshotFiles, TableCapture


@dataclass(frozen=True, slots=True)
class MirrorInput:
    """What one mirror's merge reads.

    Attributes:
        group: the group's name (for messages).
        member: the mirror declaration.
        capture: the run's changelog of the mirrored table.
        previous: the mirror's files in the previous cut (no data files: none before the first).
        previous_key_columns: the mirror's key in the previous cut (empty: not known).
        previous_watermark: the previous cut's W. Changes committed before it are in the previous
            files already: a capture that began before that cut was published replays them, and
            they are dropped (an append-only mirror would otherwise hold them twice).
        rewrite: a reason to write the mirror whole (compaction); empty: merge-on-read.
    """

    group: str
    member: Mirror
    capture: TableCapture
    previous: SnapshotFiles = field(default_factory=SnapshotFiles)
    previous_key_columns: tuple[str, ...] = ()
    previous_watermark: Lsn | None = None
    rewrite: str = ""


def mirror_input(spec: JobSpec, group: RefreshGroup, member: Mirror, capture: TableCapture) -> MirrorInput:
    """What the mirror's merge reads. A mirror copied this run starts from its copy, taken as the
    previous snapshot: the copy's files become the mirror's first data files as they are (the
    changes delete their changed rows by position) unless the mirror must be written whole."""
    if capture.bootstrap:
        return MirrorInput(group.name, member, capture, SnapshotFiles(capture.copy_files))
    return MirrorInput(
        group=group.name,
        member=member,
        capture=capture,
        previous=spec.previous_snapshot(member.name),
        previous_key_columns=spec.previous_key_columns.get(member.name, ()),
        previous_watermark=spec.prev_watermark,
        rewrite=spec.rewrite.get(member.name, ""),
    )


def diverged(source: MirrorInput, what: str) -> MirrorDivergedError:
    """The final error of a keyless mirror whose changes remove rows its previous cut lacks
    (``what`` says which), with the fix: a resync of the member."""
    return MirrorDivergedError(
        f"group {source.group!r}, member {source.member.name!r}: {what}: the mirror no longer equals its source "
        f"table {source.member.qualified_table!r}; {resync_member_fix(source.group, source.member.name)}"
    )
