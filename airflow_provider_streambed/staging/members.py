"""Staging a member's output: Parquet files first, then its manifest, so a retry can skip it.

A member's output lives in ``<staging root>/<member>/data/``; its :class:`MemberManifest` is
written last, so a manifest that exists names complete files. A retry skips every member whose
manifest exists for the same W. This module imports pyspark only for type hints, so the Airflow
face can call :func:`collect_member_manifests` without Spark.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import TYPE_CHECKING

import pyarrow.parquet as pq
from pyarrow import fs

from airflow_provider_streambed.exceptions import RefreshError
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.staging.json_io import read_json, write_json
from airflow_provider_streambed.staging.paths import join, member_dir, member_manifest_uri
from airflow_provider_streambed.staging.records import JobSpec, MemberManifest

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

logger = logging.getLogger(__name__)

DATA_DIR = "data"
#: Prefix of the line the Spark application prints on failure; the submitter reports it.
ERROR_MARKER = "STREAMBED-ERROR: "


def read_member_manifest(root: str, member: str) -> MemberManifest | None:
    """The member's staged manifest under ``root``, or ``None``."""
    data = read_json(member_manifest_uri(root, member))
    return None if data is None else MemberManifest.from_dict(data)


def staged_manifest(
    root: str, member: str, watermark: Lsn, definition: str | None = None
) -> MemberManifest | None:
    """The member's manifest if it was staged for ``watermark`` (and from ``definition``, when given).

    A retry skips a member whose manifest this returns; output computed from another declaration
    of the member (edited between tries) is computed again.
    """
    manifest = read_member_manifest(root, member)
    if manifest is None or manifest.watermark != watermark:
        return None
    if definition is not None and manifest.definition != definition:
        return None
    return manifest


def stage_member_output(
    frame: DataFrame, root: str, member: str, watermark: Lsn, key_columns: tuple[str, ...] = (), definition: str = ""
) -> MemberManifest:
    """Write ``frame`` as Parquet under the member's directory, then its manifest.

    A stale manifest (another W) is removed first, so a crash while writing never leaves a
    manifest that names files of another W.
    """
    manifest_uri = member_manifest_uri(root, member)
    filesystem, manifest_path = fs.FileSystem.from_uri(manifest_uri)
    if filesystem.get_file_info(manifest_path).type != fs.FileType.NotFound:
        filesystem.delete_file(manifest_path)
    data_uri = join(member_dir(root, member), DATA_DIR)
    frame.write.mode("overwrite").parquet(data_uri)
    files, rows = _list_parquet(data_uri)
    manifest = MemberManifest(
        member=member,
        watermark=watermark,
        files=files,
        row_count=rows,
        key_columns=key_columns,
        written_at=dt.datetime.now(dt.UTC).isoformat(),
        definition=definition,
    )
    write_json(manifest_uri, manifest.to_dict())
    logger.info("member=%s W=%s: staged rows=%d files=%d", member, watermark, rows, len(files))
    return manifest


def _list_parquet(directory_uri: str) -> tuple[tuple[str, ...], int]:
    """The Parquet data files in ``directory_uri`` (as URIs) and their total row count."""
    filesystem, path = fs.FileSystem.from_uri(directory_uri)
    infos = filesystem.get_file_info(fs.FileSelector(path))
    names = sorted(
        info.base_name
        for info in infos
        if info.type == fs.FileType.File and info.base_name.endswith(".parquet") and info.base_name[0] not in "._"
    )
    rows = 0
    for name in names:
        with filesystem.open_input_file(f"{path}/{name}") as stream:
            rows += pq.ParquetFile(stream).metadata.num_rows
    return tuple(join(directory_uri, name) for name in names), rows


def collect_member_manifests(spec: JobSpec) -> dict[str, MemberManifest]:
    """The manifest staged for the spec's W of every member the spec computes (carried ones have none).

    Raises:
        RefreshError: some members have no manifest for W; the message names them.
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
    return found
