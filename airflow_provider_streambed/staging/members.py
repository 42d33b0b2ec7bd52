"""Staging a member's output: Parquet files first, then its manifest, so a retry can skip it.

A member's output lives in ``<staging root>/<member>/data/``; its :class:`MemberManifest` is
written last, with every file's size, so a manifest that exists names complete files. A retry
skips a member whose manifest exists for the same W and declaration, with its files intact
(:func:`damage`: none truncated, none missing unless a publish moved it), and, for a derived
member, its sources' outputs unchanged (:attr:`MemberManifest.inputs`). This module imports
pyspark only for type hints, so the Airflow face can call :func:`collect_member_manifests`
without Spark.
"""

from __future__ import annotations

import datetime as dt
import logging
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq
from pyarrow import fs

from airflow_provider_streambed import storage
from airflow_provider_streambed.exceptions import RefreshError
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.staging.iceberg_fields import DELETE_FILE_PATH, DELETE_POS
from airflow_provider_streambed.staging.job_spec import JobSpec
from airflow_provider_streambed.staging.json_io import read_json, write_json
from airflow_provider_streambed.staging.member_manifest import CARRIED, MemberManifest
from airflow_provider_streambed.staging.paths import (
    delete_dir,
    join,
    member_dir,
    member_manifest_uri,
    publishing_marker_uri,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

logger = logging.getLogger(__name__)

#: A member whose previous output had at most this many rows has its output collected into the
#: worker and staged from there (one Parquet file written by pyarrow) when it has at most as many:
#: a Spark write costs a job and its commit, 0.1-0.3 s (more on Spark Connect) where the collect
#: of a small result is one round trip.
MAX_COLLECTED_ROWS = 100_000
DATA_DIR = "data"
DELETES_DIR = "deletes"
#: Prefix of the line the Spark application prints on failure; the submitter reports it.
ERROR_MARKER = "STREAMBED-ERROR: "
#: The same for a final error (:func:`~airflow_provider_streambed.exceptions.is_final`): the
#: submitter raises it as final, so the run releases its group instead of retrying.
FINAL_ERROR_MARKER = "STREAMBED-FINAL-ERROR: "


def parquet_type(arrow_type: pa.DataType) -> pa.DataType:
    """``arrow_type`` as a Parquet file gives it back: large strings and binaries as plain ones
    (pyiceberg and some writers give the large ones; Parquet and Iceberg do not tell them apart)."""
    return {pa.large_string(): pa.string(), pa.large_binary(): pa.binary()}.get(arrow_type, arrow_type)


def read_member_manifest(root: str, member: str) -> MemberManifest | None:
    """The member's staged manifest under ``root``, or ``None``."""
    data = read_json(member_manifest_uri(root, member))
    return None if data is None else MemberManifest.from_dict(data)


def staged_manifest(
    root: str, member: str, watermark: Lsn, definition: str | None = None
) -> MemberManifest | None:
    """The member's manifest if it was staged for ``watermark`` (and from ``definition``, when given).

    Output computed from another declaration of the member (edited between tries), or whose
    files are damaged (:func:`damage`), is computed again. What a retry reuses is decided by
    :func:`~airflow_provider_streambed.refresh.plan.work.fit_manifest` on top of this.
    """
    manifest = read_member_manifest(root, member)
    if manifest is None or manifest.watermark != watermark:
        return None
    if definition is not None and manifest.definition != definition:
        return None
    if (problem := damage(root, manifest)) is not None:
        logger.warning("member=%s W=%s: %s; its output is computed again", member, watermark, problem)
        return None
    return manifest


def damage(root: str, manifest: MemberManifest) -> str | None:
    """What is wrong with the files of a member's staged output, or ``None`` when they are intact.

    A file is damaged when its size differs from the staged size (truncated, or rewritten by
    someone else), or when it is missing and no publish of the run (staged at ``root``) has
    started: after that, publish has moved it into the member's table, and checks it there.
    """
    if not manifest.sizes:
        return None  # staged by an older release: nothing to check against
    infos = _file_infos(tuple(manifest.sizes))
    for uri, info in infos.items():
        if info.type != fs.FileType.NotFound and info.size != manifest.sizes[uri]:
            return f"staged file {uri} has {info.size} bytes, not the {manifest.sizes[uri]} staged (truncated?)"
    if (missing := _missing(infos)) and read_json(publishing_marker_uri(root)) is None:
        return f"staged {missing}"
    return None


def file_sizes(uris: tuple[str, ...]) -> dict[str, int]:
    """The size in bytes of each of the files ``uris`` (all on one file system).

    Raises:
        RefreshError: a file does not exist.
    """
    infos = _file_infos(uris)
    if missing := _missing(infos):
        raise RefreshError(missing)
    return {uri: int(info.size) for uri, info in infos.items()}


def _file_infos(uris: tuple[str, ...]) -> dict[str, fs.FileInfo]:
    """What the file system says of each of ``uris`` (one call; all on the file system of the first)."""
    if not uris:
        return {}
    filesystem = storage.filesystem(uris[0])[0]
    infos = filesystem.get_file_info([storage.filesystem(uri)[1] for uri in uris])
    return dict(zip(uris, infos, strict=True))


def _missing(infos: dict[str, fs.FileInfo]) -> str | None:
    """``file <uri> is missing`` (and how many are) for files that do not exist, else ``None``."""
    missing = [uri for uri, info in infos.items() if info.type == fs.FileType.NotFound]
    if not missing:
        return None
    return f"file {missing[0]} is missing" + (f" ({len(missing)} files)" if len(missing) > 1 else "")


def discard_member_output(root: str, member: str) -> None:
    """Remove a member's staged manifest, so that the refresh computes its output again."""
    filesystem, path = storage.filesystem(member_manifest_uri(root, member))
    if filesystem.get_file_info(path).type != fs.FileType.NotFound:
        filesystem.delete_file(path)


def stage_member_output(
    frame: DataFrame | pa.Table,
    root: str,
    member: str,
    watermark: Lsn,
    key_columns: tuple[str, ...] = (),
    definition: str = "",
    *,
    incremental: bool = False,
    deletes: DataFrame | pa.Table | None = None,
    reason: str = "",
    adopted: tuple[str, ...] = (),
    base_snapshot_id: int | None = None,
    resynced: str = "",
    source: Mapping[str, str] | None = None,
    renamed: Mapping[str, str] | None = None,
    keep_empty: bool = False,
    shape: str = "",
    inputs: Mapping[str, str] | None = None,
) -> MemberManifest:
    """Write ``frame`` (and ``deletes``) as Parquet under the member's directory, then its manifest.

    ``frame`` and ``deletes`` are Spark DataFrames, or Arrow tables (an in-process merge's output,
    written as one file each).

    Without ``incremental`` the files are the member's whole table; with it they are added to its
    previous snapshot (files without rows are left out), and ``deletes`` (position-delete rows,
    ``file_path`` and ``pos``) remove rows of that snapshot. ``adopted`` files (a bootstrap copy)
    belong to the whole table along with ``frame``'s, and ``deletes`` remove rows of them.
    ``reason`` says why the output is whole or incremental; ``base_snapshot_id`` names the
    previous snapshot an incremental output applies to (recorded for incremental outputs only);
    ``resynced`` why a mirror's output is a copy taken again (a resync of the member), and
    ``source`` what the capture recorded of a mirror's source table, and ``renamed`` a mirror's
    columns renamed since its last cut (old name -> new). ``keep_empty`` keeps an incremental
    output's file without rows: it carries the member's columns, which publish evolves the table
    to (a mirror whose source columns changed while no row did). ``shape`` is an incremental SQL
    member's query shape, recorded with its snapshot (:attr:`MemberManifest.shape`); ``inputs`` a
    derived member's sources' staged outputs it was computed from (:attr:`MemberManifest.inputs`).
    A stale manifest (another W) is removed first, so a crash while writing never leaves a
    manifest that names files of another W.
    """
    discard_member_output(root, member)
    data_uri = join(member_dir(root, member), DATA_DIR)
    _overwrite(frame, data_uri)
    files, rows = _list_parquet(data_uri, keep_empty=keep_empty or (not incremental and not adopted))
    if adopted:
        files, rows = adopted + files, rows + row_count(adopted)
    delete_files: tuple[str, ...] = ()
    deleted = 0
    deletes_uri = join(member_dir(root, member), DELETES_DIR)
    if (incremental or adopted) and deletes is not None:
        if isinstance(deletes, pa.Table):
            _overwrite(deletes.sort_by([(DELETE_FILE_PATH, "ascending"), (DELETE_POS, "ascending")]), deletes_uri)
        else:
            _overwrite(deletes.repartition(1).sortWithinPartitions(DELETE_FILE_PATH, DELETE_POS), deletes_uri)
        delete_files, deleted = _list_parquet(deletes_uri, keep_empty=False)
    else:
        delete_dir(deletes_uri)  # left by an earlier attempt
    manifest = MemberManifest(
        member=member,
        watermark=watermark,
        files=files,
        row_count=rows,
        key_columns=key_columns,
        written_at=dt.datetime.now(dt.UTC).isoformat(),
        definition=definition,
        incremental=incremental,
        delete_files=delete_files,
        deleted_rows=deleted,
        reason=reason,
        sizes=file_sizes(files + delete_files),
        base_snapshot_id=base_snapshot_id if incremental else None,
        resynced=resynced,
        source=dict(source or {}),
        renamed=dict(renamed or {}),
        shape=shape,
        inputs=dict(inputs or {}),
    )
    write_json(member_manifest_uri(root, member), manifest.to_dict())
    logger.info("member=%s W=%s: staged rows=%d files=%d deleted rows=%d files=%d (%s)", member, watermark, rows,
                len(files), deleted, len(delete_files), reason or "whole")
    return manifest


def _overwrite(frame: DataFrame | pa.Table, directory_uri: str) -> None:
    """Replace the directory's contents with ``frame``'s rows as Parquet (an Arrow table: one file)."""
    if not isinstance(frame, pa.Table):
        frame.write.mode("overwrite").parquet(directory_uri)
        return
    delete_dir(directory_uri)
    filesystem, path = storage.filesystem(directory_uri)
    filesystem.create_dir(path)
    pq.write_table(frame, f"{path}/part-{uuid.uuid4()}.parquet", filesystem=filesystem)


def _list_parquet(directory_uri: str, keep_empty: bool) -> tuple[tuple[str, ...], int]:
    """The Parquet data files in ``directory_uri`` (as URIs; without rows only if ``keep_empty``)
    and their total row count."""
    filesystem, path = storage.filesystem(directory_uri)
    infos = filesystem.get_file_info(fs.FileSelector(path))
    names = sorted(
        info.base_name
        for info in infos
        if info.type == fs.FileType.File and info.base_name.endswith(".parquet") and info.base_name[0] not in "._"
    )
    counted = [(name, row_count((join(directory_uri, name),))) for name in names]
    kept = [(name, rows) for name, rows in counted if rows or keep_empty]
    return tuple(join(directory_uri, name) for name, _ in kept), sum(rows for _, rows in kept)


def row_count(uris: tuple[str, ...]) -> int:
    """Rows over the Parquet files ``uris`` (read from their footers)."""
    total = 0
    for uri in uris:
        filesystem, path = storage.filesystem(uri)
        with filesystem.open_input_file(path) as stream:
            total += pq.ParquetFile(stream).metadata.num_rows
    return total


def collect_member_manifests(spec: JobSpec) -> dict[str, MemberManifest]:
    """The manifest staged for the spec's W of every member the spec computes (carried ones have none).

    Raises:
        RefreshError: some members have no manifest for W, or were computed from a source's output
            that was staged again since (its refresh task cleared alone); the message names them.
    """
    names = spec.computed_members()
    found: dict[str, MemberManifest] = {}
    missing = []
    for name in names:
        manifest = staged_manifest(spec.staging_root, name, spec.watermark)
        if manifest is None:
            missing.append(name)
        else:
            found[name] = manifest
    if missing:
        raise RefreshError(
            f"group {spec.group['name']!r}, run {spec.run_key!r}, W={spec.watermark}: "
            f"members {missing} have no staged output"
        )
    if outdated := _computed_from_older_sources(spec, found):
        raise RefreshError(
            f"group {spec.group['name']!r}, run {spec.run_key!r}, W={spec.watermark}: members {outdated} were "
            "computed from source outputs staged again since; clear their refresh tasks (or the refresh step) to "
            "compute them again"
        )
    return found


def _computed_from_older_sources(spec: JobSpec, found: Mapping[str, MemberManifest]) -> list[str]:
    """The members whose staged output (in ``found``) was computed from another output of a source
    than the one ``found`` holds now, or from a source now carried over (sources outside ``found``
    and not carried are not judged here)."""
    by_name = {name.lower(): manifest for name, manifest in found.items()}
    carried = {name.lower() for name in spec.carried}

    def now(source: str, recorded: str) -> str:
        staged = by_name.get(source.lower())
        return staged.written_at if staged is not None else CARRIED if source.lower() in carried else recorded

    return sorted(name for name, manifest in found.items() if not manifest.computed_from(
        {source: now(source, recorded) for source, recorded in manifest.inputs.items()}))
