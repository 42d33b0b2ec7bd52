"""Opening the Iceberg catalog and planning the data files of a pinned snapshot.

The embedded default is pyiceberg's ``SqlCatalog`` on an SQLite file; deployments use a
PostgreSQL database. Both let one database transaction move several tables' metadata pointers,
which is what an atomic cut needs (see :mod:`airflow_provider_streambed.publish`). A REST catalog
with the multi-table transactions endpoint serves too; its ledger lives in a database of its own
(``streambed.ledger-uri``) and its runs stage elsewhere (``streambed.staging-uri``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pyiceberg.catalog import Catalog
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.manifest import DataFileContent, FileFormat
from pyiceberg.schema import Schema
from pyiceberg.table import Table

from airflow_provider_streambed.exceptions import ConfigurationError, PublishError
from airflow_provider_streambed.ledger import Ledger
from airflow_provider_streambed.staging import SnapshotFiles
from airflow_provider_streambed.staging.file_columns import FileColumns

DEFAULT_CATALOG_NAME = "streambed"
#: Catalog property: where runs stage their files when that is not the warehouse.
STAGING_URI_PROPERTY = "streambed.staging-uri"
#: Catalog property: the ledger's database for catalogs that are not SQL catalogs.
LEDGER_URI_PROPERTY = "streambed.ledger-uri"


def open_catalog(properties: Mapping[str, str]) -> Catalog:
    """Open the catalog described by ``properties``.

    Args:
        properties: pyiceberg catalog properties. ``uri`` (an SQLAlchemy URI such as
            ``sqlite:////path/catalog.db`` or ``postgresql+psycopg://user@host/db``) and
            ``warehouse`` (a URI, e.g. ``file:///path/warehouse``) are required; ``name``
            defaults to ``streambed``; ``type`` defaults to ``sql``.

    Raises:
        ConfigurationError: ``uri`` or ``warehouse`` is missing.
    """
    props = dict(properties)
    name = props.pop("name", DEFAULT_CATALOG_NAME)
    catalog_type = props.pop("type", "sql")
    for required in ("uri", "warehouse"):
        if not props.get(required):
            raise ConfigurationError(f"catalog {name!r}: property {required!r} is required")
    if catalog_type == "sql":
        return SqlCatalog(name, **props)
    from pyiceberg.catalog import load_catalog

    return load_catalog(name, type=catalog_type, **props)


def warehouse_of(catalog: Catalog) -> str:
    """The catalog's warehouse URI (where member tables and staging live)."""
    return str(catalog.properties["warehouse"]).rstrip("/")


def staging_of(catalog: Catalog) -> str:
    """Where runs stage their files: the ``streambed.staging-uri`` property, else the warehouse.

    A catalog whose warehouse Spark cannot write (an object store without Spark's S3 support, or
    a REST catalog's warehouse name) names a staging location that capture, Spark and publish all
    reach, such as a shared directory; publish uploads the staged files into the member tables.

    Raises:
        ConfigurationError: a catalog other than a SQL catalog has no ``streambed.staging-uri``.
    """
    if staging := catalog.properties.get(STAGING_URI_PROPERTY):
        return str(staging).rstrip("/")
    if isinstance(catalog, SqlCatalog):
        return warehouse_of(catalog)
    raise ConfigurationError(f"catalog {catalog.name!r} ({type(catalog).__name__}): property "
                             f"{STAGING_URI_PROPERTY!r} is required: where runs stage their files (a directory "
                             "that capture, Spark and publish reach)")


def ledger_of(catalog: Catalog) -> Ledger:
    """The run ledger: in a SQL catalog's own database, else in the ``streambed.ledger-uri`` database.

    Raises:
        ConfigurationError: a catalog other than a SQL catalog has no ``streambed.ledger-uri``.
    """
    engine = getattr(catalog, "engine", None)
    if engine is not None:
        return Ledger(engine)
    if uri := catalog.properties.get(LEDGER_URI_PROPERTY):
        return Ledger(str(uri))
    raise ConfigurationError(f"catalog {catalog.name!r} ({type(catalog).__name__}): property "
                             f"{LEDGER_URI_PROPERTY!r} is required: the SQLAlchemy URI of the database that holds "
                             "the run ledger")


def open_with_ledger(properties: Mapping[str, str], *, create: bool = True) -> tuple[Catalog, Ledger]:
    """Open the catalog described by ``properties`` and its run ledger (:func:`open_catalog`, :func:`ledger_of`).

    Args:
        properties: pyiceberg catalog properties.
        create: create the ledger's tables when missing; ``False`` for a reader that must not write.
    """
    catalog = open_catalog(properties)
    ledger = ledger_of(catalog)
    if create:
        ledger.create()
    return catalog, ledger


@dataclass(frozen=True, slots=True)
class PlannedSnapshot:
    """A snapshot's files as pyiceberg plans them, with each file's size in bytes."""

    files: SnapshotFiles
    sizes: Mapping[str, int]


def plan_snapshot(table: Table, snapshot_id: int | None) -> PlannedSnapshot:
    """The data files of ``table`` at ``snapshot_id``, its position-delete files (``None``: empty), and sizes.

    Raises:
        PublishError: the snapshot has delete files streambed does not write (equality deletes,
            deletion vectors or another format); such a snapshot cannot be the base of a refresh.
    """
    if snapshot_id is None:
        return PlannedSnapshot(SnapshotFiles(), {})
    data: list[str] = []
    deletes: list[str] = []
    sizes: dict[str, int] = {}
    for task in table.scan(snapshot_id=snapshot_id).plan_files():
        data.append(task.file.file_path)
        sizes[task.file.file_path] = task.file.file_size_in_bytes
        for delete in task.delete_files:
            if delete.content != DataFileContent.POSITION_DELETES or delete.file_format != FileFormat.PARQUET:
                raise PublishError(
                    f"table {'.'.join(table.name())!r}, snapshot {snapshot_id}: has {delete.content.name.lower()} "
                    f"file {delete.file_path} ({delete.file_format}); streambed reads Parquet position deletes "
                    "only (rewrite the table to compact them)"
                )
            if delete.file_path not in sizes:
                deletes.append(delete.file_path)
                sizes[delete.file_path] = delete.file_size_in_bytes
    return PlannedSnapshot(SnapshotFiles(tuple(data), tuple(deletes)), sizes)


def plan_snapshot_files(table: Table, snapshot_id: int | None) -> SnapshotFiles:
    """The data and position-delete files of ``table`` at ``snapshot_id`` (see :func:`plan_snapshot`)."""
    return plan_snapshot(table, snapshot_id).files


def column_names(table: Table, schema: Schema) -> dict[str, tuple[str, ...]]:
    """Each column of ``schema`` (one of ``table``'s), by name: every name the table's files may
    hold it under, per its name mapping (a renamed column keeps its older names), its own first."""
    mapped = {field.field_id: tuple(field.names) for field in table.metadata.name_mapping() or ()}
    return {field.name: tuple(dict.fromkeys((field.name, *mapped.get(field.field_id, ())))) for field in schema.fields}


def snapshot_columns(table: Table, snapshot_id: int) -> FileColumns:
    """The columns of ``table``'s snapshot, as its files are read (:class:`~.staging.file_columns.FileColumns`)."""
    snapshot = table.snapshot_by_id(snapshot_id)
    schema_id = None if snapshot is None else snapshot.schema_id
    schema = table.schemas().get(schema_id, table.schema()) if schema_id is not None else table.schema()
    aliases = {name: names[1:] for name, names in column_names(table, schema).items() if len(names) > 1}
    return FileColumns(schema.as_arrow(), aliases)
