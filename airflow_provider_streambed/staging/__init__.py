"""Staged files between the steps of a run, and the small JSON records that describe them.

Everything a run produces lives under its staging root
``<warehouse>/_streambed/<group>/<run key>/``:

- ``_capture/<member>/*.parquet``: changelog segments of each mirrored table and its bootstrap
  copy, if any (capture step), and ``_capture/manifest.json`` (:class:`CaptureManifest`), written last.
- ``_job/spec.json``: the Spark job spec (:class:`JobSpec`), written by whoever submits the job.
- ``<member>/*.parquet`` and ``<member>/_manifest.json`` (:class:`MemberManifest`, with every
  file's size), written last by the refresh step; publish reads only members whose manifest exists.
- ``_publishing.json``: written by publish before it moves the staged files into the member
  tables (a staged file missing after that was moved, not lost).

A record whose file exists is complete (it is written after everything it names), so a retry
skips the work behind every record it finds for the same watermark. The records are pure data
with a JSON form; :mod:`.json_io` reads and writes them. Paths are URIs (``file://``, ``s3://``,
...) read and written through ``pyarrow.fs``. The capture step, the Spark job and the publish
step all import this package: :mod:`.paths`, :mod:`.json_io`, :mod:`.changelog` (segment
columns), the records (:mod:`.capture_manifest`, :mod:`.member_manifest` with a snapshot's
files, :mod:`.job_spec`), :mod:`.iceberg_fields` (position-delete columns and field ids),
:mod:`.file_names` (data file names for position deletes) and :mod:`.members` (a member's
staged output; pyspark only for type hints).
"""

from __future__ import annotations

from airflow_provider_streambed.staging.capture_manifest import CaptureManifest, TableCapture
from airflow_provider_streambed.staging.changelog import (
    COMMIT_LSN,
    OP,
    OP_DELETE,
    OP_INSERT,
    OP_TRUNCATE,
    OP_UPDATE,
    SEQ,
    TOAST_MARKER_PREFIX,
    XID,
)
from airflow_provider_streambed.staging.iceberg_fields import (
    DELETE_FIELD_IDS,
    DELETE_FILE_PATH,
    DELETE_POS,
    DELETE_ROW,
)
from airflow_provider_streambed.staging.job_spec import JobSpec
from airflow_provider_streambed.staging.json_io import (
    read_json,
    write_json,
)
from airflow_provider_streambed.staging.member_manifest import MemberManifest, SnapshotFiles
from airflow_provider_streambed.staging.members import (
    DATA_DIR,
    ERROR_MARKER,
    collect_member_manifests,
    read_member_manifest,
    stage_member_output,
    staged_manifest,
)
from airflow_provider_streambed.staging.paths import (
    CAPTURE_DIR,
    JOB_SPEC_PATH,
    MANIFEST_NAME,
    MEMBER_MANIFEST_NAME,
    capture_manifest_uri,
    delete_dir,
    delete_files,
    group_staging_dir,
    join,
    member_dir,
    member_manifest_uri,
    publishing_marker_uri,
    staging_root,
)

__all__ = [
    "CAPTURE_DIR",
    "COMMIT_LSN",
    "DATA_DIR",
    "DELETE_FIELD_IDS",
    "DELETE_FILE_PATH",
    "DELETE_POS",
    "DELETE_ROW",
    "ERROR_MARKER",
    "JOB_SPEC_PATH",
    "MANIFEST_NAME",
    "MEMBER_MANIFEST_NAME",
    "OP",
    "OP_DELETE",
    "OP_INSERT",
    "OP_TRUNCATE",
    "OP_UPDATE",
    "SEQ",
    "TOAST_MARKER_PREFIX",
    "XID",
    "CaptureManifest",
    "JobSpec",
    "MemberManifest",
    "SnapshotFiles",
    "TableCapture",
    "capture_manifest_uri",
    "collect_member_manifests",
    "delete_dir",
    "delete_files",
    "group_staging_dir",
    "join",
    "member_dir",
    "member_manifest_uri",
    "publishing_marker_uri",
    "read_json",
    "read_member_manifest",
    "stage_member_output",
    "staged_manifest",
    "staging_root",
    "write_json",
]
