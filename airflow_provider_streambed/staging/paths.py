"""Where a run's staged files and records live under its staging root (URIs joined with ``/``)."""

from __future__ import annotations

import contextlib
import hashlib
import re
from collections.abc import Mapping

from pyarrow import fs

from airflow_provider_streambed import storage

_PLAIN_DIR = re.compile(r"[A-Za-z0-9_-]+")
_UNPLAIN = re.compile(r"[^A-Za-z0-9_-]")

CAPTURE_DIR = "_capture"
MANIFEST_NAME = "manifest.json"
MEMBER_MANIFEST_NAME = "_manifest.json"
JOB_SPEC_PATH = "_job/spec.json"
PUBLISHING_NAME = "_publishing.json"


def staging_root(warehouse: str, group: str, run_key: str) -> str:
    """The staging root of one run: ``<warehouse>/_streambed/<group>/<run key>``."""
    return f"{warehouse.rstrip('/')}/_streambed/{group}/{run_key}"


def group_staging_dir(warehouse: str, group: str) -> str:
    """Where every run of ``group`` stages (for cleanup of abandoned runs)."""
    return f"{warehouse.rstrip('/')}/_streambed/{group}"


def run_dir_name(run_key: str) -> str:
    """The name of a run's data directory in a member table (``<table>/data/<name>``).

    A run key with characters other than letters, digits, ``_`` and ``-`` (an Airflow run's key
    has a dot) gets them replaced by ``_`` and a short hash of the key appended: some object
    stores' table buckets (SeaweedFS) refuse a dot in a data directory's name. Directories made
    before this rule carry the raw key; retention knows both names.
    """
    if _PLAIN_DIR.fullmatch(run_key):
        return run_key
    return f"{_UNPLAIN.sub('_', run_key)}-{hashlib.sha256(run_key.encode()).hexdigest()[:8]}"


def join(base: str, *parts: str) -> str:
    """Join URI path parts with ``/``."""
    return "/".join([base.rstrip("/"), *(part.strip("/") for part in parts)])


def capture_manifest_uri(root: str) -> str:
    """Where the capture manifest of the run staged at ``root`` lives."""
    return join(root, CAPTURE_DIR, MANIFEST_NAME)


def member_dir(root: str, member: str) -> str:
    """Where a member's output of the run staged at ``root`` lives."""
    return join(root, member)


def member_manifest_uri(root: str, member: str) -> str:
    """Where a member's manifest of the run staged at ``root`` lives."""
    return join(root, member, MEMBER_MANIFEST_NAME)


def publishing_marker_uri(root: str) -> str:
    """The record a publish of the run staged at ``root`` writes before it moves staged files
    into the member tables: from then on a staged file may be missing because it was moved."""
    return join(root, PUBLISHING_NAME)


def delete_files(directory: str, prefix: str) -> None:
    """Delete the files under ``directory`` (at any depth) whose names start with ``prefix``."""
    filesystem, path = storage.filesystem(directory)
    for info in filesystem.get_file_info(fs.FileSelector(path, allow_not_found=True, recursive=True)):
        if info.type == fs.FileType.File and info.base_name.startswith(prefix):
            filesystem.delete_file(info.path)


def delete_dir(uri: str, properties: Mapping[str, str] | None = None) -> bool:
    """Delete the directory ``uri`` and its contents; ``False`` if it did not exist (``properties``
    configure an object store, see :func:`airflow_provider_streambed.storage.filesystem`)."""
    filesystem, path = storage.filesystem(uri, properties)
    if filesystem.get_file_info(path).type == fs.FileType.NotFound:
        return False
    if storage.is_local(uri):
        filesystem.delete_dir(path)
        return True
    filesystem.delete_dir_contents(path, missing_dir_ok=True)
    with contextlib.suppress(FileNotFoundError):  # an object store's directory may be implied by its keys alone
        filesystem.delete_dir(path)
    return True
