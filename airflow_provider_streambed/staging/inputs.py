"""Local copies of member files that Spark cannot read where they are.

Spark in this repository reads local paths only (no S3 connector offline). When a group stages on
a local disk and its member tables live on an object store, the refresh step copies the files of
the previous cut that the Spark job reads into ``<staging>/_streambed/<group>/_inputs/<member>/``,
under their own names (a member's file names are unique). The copies stay between runs: a run
fetches only the files that are new since the last one and deletes the copies no snapshot it
reads names any more, so a merge-on-read mirror downloads what changed, not the table. The job
reads the copies; the files keep their URIs everywhere else (the position deletes it writes name
the published files).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor

from pyarrow import fs

from airflow_provider_streambed import storage
from airflow_provider_streambed.staging.paths import group_staging_dir, join

logger = logging.getLogger(__name__)

INPUTS_DIR = "_inputs"
#: Parallel downloads.
COPY_THREADS = 8


def needs_copies(staging: str, uri: str) -> bool:
    """Whether Spark, staging at ``staging``, reads ``uri`` from a local copy: staging is local and
    the file is not. (A Spark with S3 support stages on the object store and reads in place.)"""
    return storage.scheme_of(staging) in storage.LOCAL_SCHEMES and storage.scheme_of(uri) not in storage.LOCAL_SCHEMES


def local_copies(
    staging: str, group: str, files: Mapping[str, Iterable[str]], properties: Mapping[str, str]
) -> dict[str, str]:
    """Copy each member's files that Spark cannot reach (:func:`needs_copies`) into the group's
    input directory; returns every such file's URI mapped to its copy.

    Args:
        staging: the staging location (the catalog's ``streambed.staging-uri``).
        group: the group name.
        files: per member, the URIs of the files its job reads (data and deletes).
        properties: catalog properties (they configure the object store).
    """
    copies: dict[str, str] = {}
    fetch: list[tuple[str, str]] = []
    for member, uris in files.items():
        directory = join(group_staging_dir(staging, group), INPUTS_DIR, member)
        wanted = {uri: join(directory, uri.rsplit("/", 1)[-1]) for uri in uris if needs_copies(staging, uri)}
        local_fs, local_dir = storage.filesystem(directory)
        if not wanted and local_fs.get_file_info(local_dir).type == fs.FileType.NotFound:
            continue
        local_fs.create_dir(local_dir, recursive=True)
        present = {info.base_name for info in local_fs.get_file_info(fs.FileSelector(local_dir))}
        fetch += [(uri, copy) for uri, copy in wanted.items() if copy.rsplit("/", 1)[-1] not in present]
        for stale in present - {copy.rsplit("/", 1)[-1] for copy in wanted.values()}:
            local_fs.delete_file(f"{local_dir}/{stale}")
        copies.update(wanted)
    if fetch:
        with ThreadPoolExecutor(max_workers=min(COPY_THREADS, len(fetch))) as pool:
            list(pool.map(lambda pair: _fetch(pair[0], pair[1], properties), fetch))
    if copies:
        logger.info("group=%s: %d input files copied for Spark, %d of them fetched now", group, len(copies), len(fetch))
    return copies


def _fetch(uri: str, copy: str, properties: Mapping[str, str]) -> None:
    """Download ``uri`` to ``copy`` (under a temporary name, then renamed: a crash leaves no half file)."""
    source_fs, source_path = storage.filesystem(uri, properties)
    local_fs, local_path = storage.filesystem(copy)
    partial = f"{local_path}.partial"
    fs.copy_files(source_path, partial, source_filesystem=source_fs, destination_filesystem=local_fs)
    local_fs.move(partial, local_path)
