"""Local copies of member files, the fallback for a Spark without an object-store connector.

A group that stages on the object store has Spark read the previous cut in place (through S3A,
:mod:`airflow_provider_streambed.refresh.spark.object_store`): nothing is copied. A group that
stages on a local or shared disk while its member tables live on an object store says its Spark
reads local paths only; the refresh step then copies the files of the previous cut that the
Spark job reads into ``<staging>/_streambed/<group>/_inputs/<member>/``,
under their own names (a member's file names are unique). The copies stay between runs: a run
fetches only the files that are new since the last one and deletes the copies no snapshot it
reads names any more, so a merge-on-read mirror downloads what changed, not the table. Each copy
sits in a directory named by a hash of its URI and keeps the file's name (Spark matches position
deletes by file name): two files of one name (the bootstrap copies of two resyncs) never share a
copy. The job reads the copies; the files keep their URIs everywhere else (the position deletes
it writes name the published files). Member tasks of one run may copy at the same time: each
download goes to a file of its own before it is renamed into place.
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor

from pyarrow import fs

from airflow_provider_streambed import storage
from airflow_provider_streambed.staging.paths import group_staging_dir, join

logger = logging.getLogger(__name__)

INPUTS_DIR = "_inputs"
PARTIAL = ".partial"
#: Parallel downloads.
COPY_THREADS = 8


def needs_copies(staging: str, uri: str) -> bool:
    """Whether Spark, staging at ``staging``, reads ``uri`` from a local copy: staging is local and
    the file is not. (A staging location on an object store means a Spark that reads it in place.)"""
    return storage.is_local(staging) and not storage.is_local(uri)


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
        wanted = {uri: copy_uri(directory, uri) for uri in uris if needs_copies(staging, uri)}
        keys = {_key(uri) for uri in wanted}
        local_fs, local_dir = storage.filesystem(directory)
        if not wanted and local_fs.get_file_info(local_dir).type == fs.FileType.NotFound:
            continue
        local_fs.create_dir(local_dir, recursive=True)
        present = {info.path.rsplit("/", 2)[-2]: info for info in
                   local_fs.get_file_info(fs.FileSelector(local_dir, recursive=True))
                   if info.type == fs.FileType.File and not info.base_name.endswith(PARTIAL)}
        fetch += [(uri, copy) for uri, copy in wanted.items() if _key(uri) not in present]
        for stale in {info.path.rsplit("/", 1)[0] for key, info in present.items() if key not in keys}:
            local_fs.delete_dir(stale)
        copies.update(wanted)
    if fetch:
        with ThreadPoolExecutor(max_workers=min(COPY_THREADS, len(fetch))) as pool:
            list(pool.map(lambda pair: _fetch(pair[0], pair[1], properties), fetch))
    if copies:
        logger.info("group=%s: Spark reads local copies of %d input files, %d of them fetched now (the fallback for "
                    "a Spark without an object-store connector: staging is on a local disk, the tables are not; "
                    "stage on the object store to read them in place)", group, len(copies), len(fetch))
    return copies


def copy_uri(directory: str, uri: str) -> str:
    """Where the copy of ``uri`` goes: ``<directory>/<hash of the URI>/<file name>``."""
    return join(directory, _key(uri), uri.rsplit("/", 1)[-1])


def _key(uri: str) -> str:
    return hashlib.sha256(uri.encode()).hexdigest()[:16]


def _fetch(uri: str, copy: str, properties: Mapping[str, str]) -> None:
    """Download ``uri`` to ``copy``: to a file of this download's own, then renamed into place (a
    crash leaves no half copy, and a concurrent download of the same file is harmless)."""
    source_fs, source_path = storage.filesystem(uri, properties)
    local_fs, local_path = storage.filesystem(copy)
    local_fs.create_dir(local_path.rsplit("/", 1)[0], recursive=True)
    partial = f"{local_path}.{uuid.uuid4().hex}{PARTIAL}"
    fs.copy_files(source_path, partial, source_filesystem=source_fs, destination_filesystem=local_fs)
    local_fs.move(partial, local_path)
