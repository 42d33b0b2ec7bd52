"""What a mirror's merge gives (Spark's or the in-process one's), and staging it for the run's W."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa

from airflow_provider_streambed.refresh.mirrors.merge_input import MirrorInput
from airflow_provider_streambed.staging import JobSpec, MemberManifest
from airflow_provider_streambed.staging.members import stage_member_output

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


@dataclass(frozen=True, slots=True)
class MirrorOutput:
    """A mirror's merge result.

    Attributes:
        rows: the mirror's whole table, or (``incremental``) the rows to add to the previous snapshot.
        deletes: (``incremental``) position-delete rows over the previous snapshot's files; ``None``
            when nothing is deleted.
        incremental: whether ``rows`` and ``deletes`` apply on top of the previous snapshot.
        reason: why the output is whole or incremental, for logs and the staged manifest.
    """

    rows: DataFrame
    deletes: DataFrame | None
    incremental: bool
    reason: str


@dataclass(frozen=True, slots=True)
class LocalMirrorOutput:
    """An in-process merge's result, always incremental (see :class:`MirrorOutput`).

    Attributes:
        rows: the new images of the changed keys, with the table's columns at W.
        deletes: position-delete rows (:data:`.position_delete_rows.DELETE_SCHEMA`) over the previous snapshot's files;
            ``None`` when nothing is deleted.
        reason: ``merge-on-read``, or ``append-only`` for a mirror without a key.
    """

    rows: pa.Table
    deletes: pa.Table | None
    reason: str
    incremental: bool = True


def stage_mirror(
    spec: JobSpec, source: MirrorInput, output: MirrorOutput | LocalMirrorOutput, definition: str
) -> MemberManifest:
    """Stage a mirror's merge output: a bootstrap copy merged on read is adopted as its first files."""
    capture = source.capture
    adopted = source.previous.data if capture.bootstrap and output.incremental else ()
    return stage_member_output(
        output.rows, spec.staging_root, source.member.name, spec.watermark, capture.key_columns, definition,
        incremental=output.incremental and not adopted, deletes=output.deletes,
        reason="bootstrap copy adopted, changes merged on read" if adopted else output.reason, adopted=adopted,
        base_snapshot_id=spec.previous_snapshots.get(source.member.name), resynced=capture.resynced,
        source=capture.source_record(), renamed=capture.renamed, keep_empty=capture.reshaped,
    )
