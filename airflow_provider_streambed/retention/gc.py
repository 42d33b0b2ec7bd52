"""Deleting the files of a group's member tables that nothing needs any more.

A file under a member table's ``data/`` or ``metadata/`` directory (Parquet, Avro manifests and
manifest lists, ``*.metadata.json``) is garbage when none of these needs it:

- a kept cut: its metadata file, and its snapshot's manifest list, manifests, data and delete files;
- the table: its current metadata file, the files of its metadata log (``write.metadata.previous-versions-max``
  bounds it), and the files of every snapshot it still has;
- an unpublished run: everything under ``data/<run key>/`` of a run without a cut (pinned,
  failed, or unknown: publish cleanup decides about those) is left alone;
- a publish or expiry attempt that may still commit: the files named by its attempt id.

The work is ordered so that a concurrent publish can never lose a file: the directories are
listed first, then the runs and attempts are read, then the references. A file written after
the listing is not seen; one listed before its run published is either protected by its run
(read after the listing, so the run is known) or referenced (read after that).

A table the catalog no longer has (dropped or renamed while a kept cut names it) is left alone:
its kept cut still reads it through its own metadata file. Only tables on file systems whose
listings and Iceberg URIs are known to name files alike are collected (local paths, S3, GCS);
others are skipped with a warning.

Garbage is deleted once it has been seen unreferenced for ``delete_files_after`` and is at least
that old: a reader that loaded a cut just before it expired keeps working that long. When each
file was first seen unreferenced is kept in ``<warehouse>/_streambed/<group>/_gc/pending.json``;
a crash anywhere leaves that record and the tables valid, and the next run finishes the work.
Works on any ``pyarrow.fs`` file system (local paths and object stores).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import unquote, urlparse

from pyarrow import fs
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.io import FileIO, load_file_io
from pyiceberg.serializers import FromInputFile
from pyiceberg.table import TableProperties
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.snapshots import Snapshot

from airflow_provider_streambed import storage
from airflow_provider_streambed.catalog import warehouse_of
from airflow_provider_streambed.ledger import CutMember, Ledger
from airflow_provider_streambed.ledger.schema import now as utc_now
from airflow_provider_streambed.publish.attempts import ATTEMPTS_DIR, Attempt
from airflow_provider_streambed.publish.expiry import ExpiryPlan
from airflow_provider_streambed.publish.iceberg.manifests import read_live_entries, read_manifest_list
from airflow_provider_streambed.publish.iceberg.pointers import current_pointers
from airflow_provider_streambed.staging import group_staging_dir, join, read_json, write_json
from airflow_provider_streambed.staging.paths import run_dir_name

logger = logging.getLogger(__name__)

#: Where GC keeps, per group, when each unreferenced file was first seen and when it last ran.
JOURNAL_PATH = "_gc/pending.json"
#: The files GC may delete; anything else under a table's directories is left alone.
COLLECTED_SUFFIXES = (".parquet", ".avro", ".metadata.json")
#: URI schemes whose pyarrow listings match :func:`path_of` of Iceberg's URIs (``bucket/key`` on
#: object stores). ``abfss://container@account/...`` and ``hdfs://host/...`` list differently.
COLLECTED_SCHEMES = ("", "file", "s3", "s3a", "gs")


@dataclass(frozen=True, slots=True)
class GcResult:
    """What a garbage collection found and did.

    Attributes:
        deleted: the files deleted (in a dry run: that would be deleted now).
        pending: unreferenced files waiting for ``delete_files_after``.
        kept: files on disk that a kept cut, a table, a run or an attempt needs.
    """

    deleted: tuple[str, ...] = ()
    pending: int = 0
    kept: int = 0


def path_of(uri: str) -> str:
    """The file system path of ``uri``, as ``pyarrow.fs`` lists it (``bucket/key`` on object stores),
    percent-decoded.

    Iceberg writers differ on whether a URI's ``%XX`` is an escape (``Path.as_uri``, pyarrow) or
    part of the name (pyiceberg's own file IO), so GC compares decoded forms on both sides
    (:func:`key_of` for listed paths): a file matching a reference either way is kept.
    """
    parsed = urlparse(uri)
    if parsed.scheme in ("", "file"):
        return unquote(parsed.path)
    return f"{parsed.netloc}{unquote(parsed.path)}"


def key_of(listed_path: str) -> str:
    """A listed path in the form :func:`path_of` gives references."""
    return unquote(listed_path)


def journal_uri(warehouse: str, group: str) -> str:
    """Where the GC record of ``group`` lives."""
    return join(group_staging_dir(warehouse, group), JOURNAL_PATH)


def gc_due(warehouse: str, group: str, delete_files_after: dt.timedelta, now: dt.datetime) -> bool:
    """Whether a GC after a publish is due: none ran within half of ``delete_files_after``."""
    journal = read_json(journal_uri(warehouse, group)) or {}
    last = journal.get("last_run")
    return last is None or now - dt.datetime.fromisoformat(last) >= delete_files_after / 2


def collect_garbage(
    catalog: SqlCatalog,
    ledger: Ledger,
    group: str,
    delete_files_after: dt.timedelta,
    *,
    dry_run: bool = False,
    now: dt.datetime | None = None,
    expiring: ExpiryPlan | None = None,
) -> GcResult:
    """Delete the garbage files of ``group``'s member tables (see the module docstring).

    Args:
        catalog: the SQL catalog of the member tables.
        ledger: the run ledger.
        group: the group name.
        delete_files_after: how long a file stays unreferenced before it is deleted.
        dry_run: report what would be deleted now; change nothing.
        now: the time of the run (tests).
        expiring: judge the references as if this expiry had happened (a dry run): without its
            cuts and snapshots, and with each of its tables' metadata log as its commit would trim it.
    """
    now = now or utc_now()
    warehouse = warehouse_of(catalog)
    cuts = ledger.list_cuts(group)
    tables = _table_locations(member for cut in cuts for member in cut.members.values())
    listing = [entry for location in tables.values() for entry in _listing(location)]
    listed = {info.path: (filesystem, info) for filesystem, info in listing if info.type == fs.FileType.File}
    # a published run's data directory: its run_dir_name, or its raw key (made before that rule)
    published = {name for key in ledger.published_run_keys(group) for name in (key, run_dir_name(key))}
    attempts = _Attempts.of(_open_attempts(warehouse, group))
    expiring = expiring or ExpiryPlan(group)
    kept = [member for cut in ledger.list_cuts(group) if cut.cut_id not in expiring.cut_ids  # read after the listing
            for member in cut.members.values()]
    needed, present = _references(catalog, tables, kept, expiring)
    absent = [location for identifier, location in tables.items() if identifier not in present]
    data_dirs = [path_of(location).rstrip("/") + "/data/" for location in tables.values()]
    garbage = {
        path: info for path, (_, info) in listed.items()
        if (key := key_of(path)) not in needed and not _protected(key, data_dirs, published, attempts)
        and not _under(key, absent)
    }
    uri = journal_uri(warehouse, group)
    seen = (read_json(uri) or {}).get("files", {})
    first_seen = {path: seen.get(path, now.isoformat()) for path in garbage}
    cutoff = now - delete_files_after
    due = sorted(path for path, info in garbage.items()
                 if dt.datetime.fromisoformat(first_seen[path]) <= cutoff and info.mtime <= cutoff)
    if not dry_run:
        write_json(uri, {"files": first_seen, "last_run": now.isoformat()})
        _delete(due, listed)
        write_json(uri, {"files": {p: t for p, t in first_seen.items() if p not in due}, "last_run": now.isoformat()})
        _delete_emptied_run_dirs(listing, set(listed) - set(due), tables, published)
        if due:
            logger.info("group=%s: deleted %d unreferenced files", group, len(due))
    return GcResult(tuple(due), len(garbage) - len(due), kept=len(listed) - len(garbage))


def _table_locations(members: Iterable[CutMember]) -> dict[str, str]:
    """Per table identifier of the kept cuts, the table's location (``<table>/metadata/<file>`` -> ``<table>``),
    for tables on a file system GC knows how to match (:data:`COLLECTED_SCHEMES`)."""
    tables = {member.table_identifier: member.table_location for member in members}
    skipped = [identifier for identifier, location in tables.items()
               if urlparse(location).scheme not in COLLECTED_SCHEMES]
    if skipped:
        logger.warning("tables %s: files on this file system are not collected", sorted(skipped))
    return {identifier: location for identifier, location in tables.items() if identifier not in skipped}


def _under(path: str, locations: Iterable[str]) -> bool:
    """Whether ``path`` lies under one of the table ``locations``."""
    return any(path.startswith(path_of(location).rstrip("/") + "/") for location in locations)


def _listing(location: str) -> list[tuple[fs.FileSystem, fs.FileInfo]]:
    """The collectable files under ``location``'s ``data/`` and ``metadata/`` directories, and the
    run directories ``data/<run key>`` (none on object stores)."""
    filesystem, base = storage.filesystem(location)
    found = []
    for directory in ("data", "metadata"):
        selector = fs.FileSelector(f"{base}/{directory}", allow_not_found=True, recursive=True)
        found += [(filesystem, info) for info in filesystem.get_file_info(selector)
                  if (info.type == fs.FileType.File and info.base_name.endswith(COLLECTED_SUFFIXES))
                  or (info.type == fs.FileType.Directory and info.path.rsplit("/", 2)[-2] == "data")]
    return found


def _open_attempts(warehouse: str, group: str) -> list[Attempt]:
    """The group's recorded publish and expiry attempts (each may still commit until swept)."""
    directory = join(group_staging_dir(warehouse, group), ATTEMPTS_DIR)
    filesystem, path = storage.filesystem(directory)
    attempts = []
    for info in filesystem.get_file_info(fs.FileSelector(path, allow_not_found=True)):
        if not info.base_name.endswith(".json"):
            continue
        with contextlib.suppress(FileNotFoundError):  # swept since the listing: it no longer protects anything
            if (data := read_json(join(directory, info.base_name))) is not None:
                attempts.append(Attempt.from_dict(data))
    return attempts


@dataclass(frozen=True, slots=True)
class _Attempts:
    """What the recorded attempts protect: files named by their ids, and their new metadata files."""

    ids: tuple[str, ...]
    metadata: frozenset[str]

    @classmethod
    def of(cls, attempts: list[Attempt]) -> _Attempts:
        return cls(tuple(attempt.attempt_id for attempt in attempts),
                   frozenset(path_of(str(table["new"])) for attempt in attempts for table in attempt.tables.values()))


def _protected(path: str, data_dirs: list[str], published: set[str], attempts: _Attempts) -> bool:
    """Whether ``path`` belongs to an unpublished run's data (under one of the tables' ``data_dirs``)
    or to a recorded attempt."""
    name = path.rsplit("/", 1)[-1]
    if path in attempts.metadata or any(attempt_id in name for attempt_id in attempts.ids):
        return True
    for base in data_dirs:
        if path.startswith(base):
            parts = path[len(base):].split("/")
            return len(parts) < 2 or parts[0] not in published
    return False


def _references(
    catalog: SqlCatalog, tables: Mapping[str, str], members: list[CutMember], expiring: ExpiryPlan
) -> tuple[set[str], set[str]]:
    """The paths of every file a kept cut or a member table's current metadata needs (less the
    snapshots ``expiring`` removes), and the identifiers of the tables the catalog has."""
    namespaces: dict[str, list[str]] = {}
    for identifier in tables:
        namespace, name = identifier.split(".", 1)
        namespaces.setdefault(namespace, []).append(name)
    pointers = {f"{namespace}.{name}": location for namespace, names in namespaces.items()
                for name, location in current_pointers(catalog, namespace, names).items()}
    needed: set[str] = set()
    manifests: dict[str, list[str]] = {}
    by_table: dict[str, list[CutMember]] = {}
    for member in members:
        by_table.setdefault(member.table_identifier, []).append(member)
    for identifier, location in pointers.items():
        io = load_file_io(catalog.properties, location)
        metadata = FromInputFile.table_metadata(io.new_input(location))
        log_limit = expiring.previous_versions if identifier in expiring.tables else None
        needed.update(path_of(file) for file in _metadata_files(location, metadata, log_limit))
        removed = expiring.tables[identifier].snapshot_ids if identifier in expiring.tables else ()
        snapshots = [snapshot for snapshot in metadata.snapshots if snapshot.snapshot_id not in removed]
        for member in by_table.get(identifier, []):
            needed.add(path_of(member.metadata_location))
            if metadata.snapshot_by_id(member.snapshot_id) is None:  # removed by another writer: read the cut's
                snapshots += _cut_snapshot(io, member)
        for snapshot in snapshots:
            needed |= _snapshot_files(io, snapshot, manifests)
    return needed, set(pointers)


def _metadata_files(location: str, metadata: TableMetadata, log_limit: int | None) -> list[str]:
    """The current metadata file and those in its log; with ``log_limit`` (an expiry will commit on
    this table), the log that commit would leave instead: the current file appended, trimmed to
    the table's ``write.metadata.previous-versions-max`` or else ``log_limit``."""
    log = [entry.metadata_file for entry in metadata.metadata_log]
    if not log_limit:
        return [location, *log]
    limit = int(metadata.properties.get(TableProperties.METADATA_PREVIOUS_VERSIONS_MAX, log_limit))
    return [*log, location][-max(1, limit):]


def _cut_snapshot(io: FileIO, member: CutMember) -> list[Snapshot]:
    """The member's snapshot as its cut's own metadata file has it (empty if that file is gone too)."""
    try:
        metadata: TableMetadata = FromInputFile.table_metadata(io.new_input(member.metadata_location))
    except FileNotFoundError:
        return []
    snapshot = metadata.snapshot_by_id(member.snapshot_id)
    return [] if snapshot is None else [snapshot]


def _snapshot_files(io: FileIO, snapshot: Snapshot, manifests: dict[str, list[str]]) -> set[str]:
    """A snapshot's manifest list, manifests and live data and delete files (``manifests`` caches
    each manifest's files: manifests are immutable and shared between snapshots)."""
    files = {path_of(snapshot.manifest_list)}
    for manifest in read_manifest_list(io, snapshot.manifest_list):
        path = manifest.manifest_path
        if path not in manifests:
            manifests[path] = [path_of(entry.data_file.file_path) for entry in read_live_entries(io, manifest)]
        files.add(path_of(path))
        files.update(manifests[path])
    return files


def _delete_emptied_run_dirs(
    listing: list[tuple[fs.FileSystem, fs.FileInfo]],
    remaining: set[str],
    tables: Mapping[str, str],
    published: set[str],
) -> None:
    """Delete the ``data/<run key>`` directories of published runs that no listed file is left in
    (a published run's directory never gains a file again; a listing walks every directory)."""
    bases = {path_of(location).rstrip("/") + "/data" for location in tables.values()}
    occupied = {key_of(path).rsplit("/", 1)[0] for path in remaining}
    for filesystem, info in listing:
        parent, run_key = key_of(info.path).rsplit("/", 1)
        emptied = f"{parent}/{run_key}" not in occupied and run_key in published
        if info.type == fs.FileType.Directory and parent in bases and emptied:
            with contextlib.suppress(FileNotFoundError):
                filesystem.delete_dir(info.path)


def _delete(paths: list[str], listed: Mapping[str, tuple[fs.FileSystem, fs.FileInfo]]) -> None:
    """Delete ``paths``, each on the file system it was listed from (one already gone is skipped)."""
    for path in paths:
        with contextlib.suppress(FileNotFoundError):  # a concurrent GC deleted it first
            listed[path][0].delete_file(path)
