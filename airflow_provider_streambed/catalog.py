"""Opening the Iceberg catalog: its properties, its warehouse, staging root and ledger.

The embedded default is pyiceberg's ``SqlCatalog`` on an SQLite file; deployments use a
PostgreSQL database. Both let one database transaction move several tables' metadata pointers,
which is what an atomic cut needs (see :mod:`airflow_provider_streambed.publish`). A REST catalog
with the multi-table transactions endpoint serves too; its ledger lives in a database of its own
(``streambed.ledger-uri``) and its runs stage elsewhere (``streambed.staging-uri``).
"""

from __future__ import annotations

from collections.abc import Mapping

from pyiceberg.catalog import Catalog
from pyiceberg.catalog.sql import SqlCatalog

from airflow_provider_streambed import storage
from airflow_provider_streambed.exceptions import ConfigurationError
from airflow_provider_streambed.ledger import Ledger

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
        catalog: Catalog = SqlCatalog(name, **props)
    else:
        from pyiceberg.catalog import load_catalog

        catalog = load_catalog(name, type=catalog_type, **props)
    configure_storage(catalog)
    return catalog


def configure_storage(catalog: Catalog) -> None:
    """Configure the object stores of the catalog's warehouse and staging locations from its
    properties (:func:`airflow_provider_streambed.storage.configure`), so that every file of its
    runs is reached with them."""
    for location in (catalog.properties.get("warehouse"), catalog.properties.get(STAGING_URI_PROPERTY)):
        if location:
            storage.configure(str(location), catalog.properties)


def warehouse_of(catalog: Catalog) -> str:
    """The catalog's warehouse URI (where member tables and staging live)."""
    return str(catalog.properties["warehouse"]).rstrip("/")


def staging_of(catalog: Catalog) -> str:
    """Where runs stage their files: the ``streambed.staging-uri`` property, else the warehouse.

    A REST catalog (whose warehouse is a name) names a staging location that capture, Spark and
    publish all reach: a bucket of the object store (Spark reads and writes it with its S3
    connector, publish copies the staged files into the member tables within the store), or a
    shared directory for a Spark without an object-store connector.

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
