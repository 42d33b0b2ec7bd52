"""Loading each member table before a cut: from its pointer (the metadata files read in parallel on
remote storage) or through the catalog (:func:`load_members`), or staging a new table on first use;
and naming its next metadata file (:mod:`.iceberg.metastore`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.parquet as pq
from pyarrow import fs
from pyiceberg.catalog import Catalog, MetastoreCatalog
from pyiceberg.exceptions import NoSuchTableError
from pyiceberg.io import load_file_io
from pyiceberg.serializers import FromInputFile
from pyiceberg.table import StagedTable, Table

from airflow_provider_streambed import storage
from airflow_provider_streambed.catalog import warehouse_of
from airflow_provider_streambed.exceptions import DamagedOutputError, PublishError
from airflow_provider_streambed.publish.iceberg.metastore import (
    default_table_location,
    next_metadata_location,
    stage_table,
)
from airflow_provider_streambed.publish.members import MemberPlan
from airflow_provider_streambed.publish.staged import moved_path
from airflow_provider_streambed.staging import MemberManifest

T = TypeVar("T")
R = TypeVar("R")

#: Threads for per-member file I/O (metadata reads, Parquet footers, Avro and JSON writes) on
#: remote storage. On a local disk that work is CPU-bound Python: threads only contend for the GIL.
IO_THREADS = 16


def parallel(function: Callable[[T], R], items: Iterable[T], location: str) -> list[R]:
    """``map`` over ``items``, whose files live under ``location``, re-raising the first error.

    In a thread pool when ``location`` is remote storage (file I/O bound), one by one on a local disk.
    """
    listed = list(items)
    if len(listed) <= 1 or urlparse(location).scheme in ("", "file"):
        return [function(item) for item in listed]
    with ThreadPoolExecutor(max_workers=min(IO_THREADS, len(listed))) as pool:
        return list(pool.map(function, listed))


def plan_members(
    catalog: Catalog,
    namespace: str,
    members: Iterable[str],
    manifests: Mapping[str, MemberManifest],
    pointers: Mapping[str, str],
    run_key: str = "",
) -> dict[str, MemberPlan]:
    """Load (or stage, on first use) every member's table; ``pointers`` from
    :func:`~.iceberg.pointers.current_pointers`.

    A table that does not exist yet takes its schema from the member's staged output (``manifests``
    of the run ``run_key``), wherever it is: in staging, or moved by an earlier attempt.
    """
    names = list(members)
    if any(name not in pointers for name in names):
        catalog.create_namespace_if_not_exists(namespace)

    def plan(member: str) -> MemberPlan:
        identifier = (namespace, member)
        location = pointers.get(member)
        if location is None:
            if member not in manifests:
                raise PublishError(f"member {member!r}: table {namespace}.{member} does not exist, nothing staged")
            staged = _stage_new_table(catalog, identifier, manifests[member], run_key)
            return MemberPlan(member, identifier, staged, None, staged.metadata_location)
        metadata = FromInputFile.table_metadata(load_file_io(catalog.properties, location).new_input(location))
        io = load_file_io({**catalog.properties, **metadata.properties}, location)
        table = Table(identifier=identifier, metadata=metadata, metadata_location=location, io=io, catalog=catalog)
        return MemberPlan(member, identifier, table, location, next_metadata_location(metadata, location))

    return dict(zip(names, parallel(plan, names, warehouse_of(catalog)), strict=True))


def _stage_new_table(
    catalog: Catalog, identifier: tuple[str, str], manifest: MemberManifest, run_key: str
) -> StagedTable:
    """A new table whose schema comes from the staged Parquet footer (the name mapping follows).

    Raises:
        DamagedOutputError: the file is not readable Parquet (truncated).
    """
    if not isinstance(catalog, MetastoreCatalog):
        raise PublishError(f"catalog {catalog.name!r} cannot stage table {'.'.join(identifier)}")
    def moved(source: str) -> str:  # where an earlier attempt moved it: the new table's location
        return moved_path(default_table_location(catalog, identifier), run_key, source)

    return stage_table(catalog, identifier, new_table_schema(manifest, ".".join(identifier), moved))


def new_table_schema(
    manifest: MemberManifest, table_name: str, moved: Callable[[str], str] | None = None,
    properties: Mapping[str, str] | None = None,
) -> pa.Schema:
    """The schema of a member's first staged file, for its table created on first use: where it
    was staged, else (``moved``) where an earlier attempt moved it. ``properties`` configure an
    object store.

    Raises:
        PublishError: the output has no Parquet file.
        DamagedOutputError: the file is not readable Parquet (truncated).
    """
    if not manifest.files:
        raise PublishError(f"member {manifest.member!r}: table {table_name} does not exist yet and the staged "
                           "output has no Parquet file to take its schema from")
    source = manifest.files[0]
    filesystem, path = storage.filesystem(source, properties)
    if moved is not None and filesystem.get_file_info(path).type == fs.FileType.NotFound:
        filesystem, path = storage.filesystem(moved(source), properties)
    try:
        with filesystem.open_input_file(path) as stream:
            return pq.read_schema(stream)
    except (pa.ArrowInvalid, OSError) as error:
        raise DamagedOutputError(f"member {manifest.member!r}: staged file {source} is not readable Parquet "
                                 f"({error})", manifest.member) from error


def load_members(catalog: Catalog, namespace: str, members: list[str]) -> dict[str, Table]:
    """The member tables that exist (loaded in parallel: one request each)."""
    def load(name: str) -> Table | None:
        try:
            return catalog.load_table((namespace, name))
        except NoSuchTableError:
            return None

    loaded = parallel(load, members, str(catalog.properties.get("uri", "")))
    return {name: table for name, table in zip(members, loaded, strict=True) if table is not None}
