"""Reading a cut through Iceberg's Spark runtime: which catalog of a session serves the group's
catalog, and a member read by its cut's tag.

Runs in the Spark driver (a notebook, a job). Spark with Iceberg's runtime reads a member at a
cut as ``SELECT * FROM <catalog>.<namespace>.<table> VERSION AS OF '<group>-cut-<k>'``, deletes
applied inside its scan. :func:`serving_catalog` decides whether a session can: an Iceberg
catalog of the session (``spark.sql.catalog.<name>`` set to Iceberg's ``SparkCatalog`` or
``SparkSessionCatalog``) serves the group's catalog when

- for a SQL catalog (pyiceberg's ``SqlCatalog``): it is Iceberg's JDBC catalog
  (``type=jdbc``), its ``uri`` names the same database (backend, host, port and database of the
  JDBC URL against the SQLAlchemy URI; loopback names count as one host; an SQLite file by its
  absolute path), and it is *named like the catalog* (``streambed`` by default): Iceberg's JDBC
  catalog reads the rows of the ``iceberg_tables`` table whose ``catalog_name`` is its own name;
- for a REST catalog: it is Iceberg's REST catalog (``type=rest``) with the same ``uri`` and,
  when both name one, the same ``warehouse``.

:func:`jdbc_catalog_conf` gives the Spark settings of such a JDBC catalog for a SQL catalog's
properties, without a password.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from pyiceberg.catalog import Catalog
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.catalog.sql import SqlCatalog
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from airflow_provider_streambed.catalog import DEFAULT_CATALOG_NAME
from airflow_provider_streambed.exceptions import ConfigurationError
from airflow_provider_streambed.ledger import CutMember

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

logger = logging.getLogger(__name__)

#: Where Spark reads a catalog's plugin class and, below it, the catalog's properties.
CATALOG_PREFIX = "spark.sql.catalog."
#: Iceberg's Spark catalog classes.
ICEBERG_CATALOG_CLASSES = ("org.apache.iceberg.spark.SparkCatalog", "org.apache.iceberg.spark.SparkSessionCatalog")
#: Iceberg's catalog types by their ``catalog-impl`` class (a catalog names one or the other).
CATALOG_TYPES = {"org.apache.iceberg.jdbc.JdbcCatalog": "jdbc", "org.apache.iceberg.rest.RESTCatalog": "rest"}
#: The catalog properties that say what a catalog reads.
READ_PROPERTIES = ("type", "catalog-impl", "uri", "warehouse")
LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1"})
POSTGRESQL_PORT = 5432


def spark_identifier(*parts: str) -> str:
    """A multi-part Spark SQL identifier, each part quoted with backticks."""
    return ".".join("`" + part.replace("`", "``") + "`" for part in parts)


def iceberg_catalogs(spark: SparkSession) -> dict[str, dict[str, str]]:
    """The session's Iceberg catalogs: name to its :data:`READ_PROPERTIES` that are set.

    The names come from ``SET`` (every setting of the session, also on Spark Connect), the values
    from ``spark.conf`` (``SET`` redacts a value that looks like it holds a password).
    """
    names = {key.removeprefix(CATALOG_PREFIX) for key, _ in spark.sql("SET").collect()
             if key.startswith(CATALOG_PREFIX) and "." not in key.removeprefix(CATALOG_PREFIX)}
    catalogs = {}
    for name in sorted(names):
        if spark.conf.get(f"{CATALOG_PREFIX}{name}", None) not in ICEBERG_CATALOG_CLASSES:
            continue
        settings = {key: spark.conf.get(f"{CATALOG_PREFIX}{name}.{key}", None) for key in READ_PROPERTIES}
        catalogs[name] = {key: value for key, value in settings.items() if value}
    return catalogs


def catalog_type(properties: Mapping[str, str]) -> str:
    """The Iceberg catalog type of a Spark catalog's properties (``type``, else its ``catalog-impl``)."""
    return properties.get("type") or CATALOG_TYPES.get(properties.get("catalog-impl", ""), "")


def database_of(uri: str) -> tuple[str, ...]:
    """What database a SQLAlchemy URI or a JDBC URL names: ``(backend, host, port, database)``,
    ``("sqlite", absolute path)``, or ``()`` for one of another kind.

    >>> database_of("postgresql+psycopg://streambed@localhost/lake") == database_of(
    ...     "jdbc:postgresql://127.0.0.1:5432/lake?user=streambed")
    True
    """
    if uri.startswith("jdbc:sqlite:"):
        return ("sqlite", os.path.abspath(uri.removeprefix("jdbc:sqlite:").removeprefix("file:").split("?")[0]))
    if uri.startswith("jdbc:postgresql:"):
        parts = urlsplit(uri.removeprefix("jdbc:"))
        host, port, database = parts.hostname or "localhost", parts.port, parts.path.lstrip("/")
        if not parts.netloc:  # jdbc:postgresql:database
            database = parts.path
    else:
        try:
            url = make_url(uri)
        except ArgumentError:  # not an SQLAlchemy URI
            return ()
        if url.get_backend_name() == "sqlite":
            return ("sqlite", os.path.abspath(url.database or ""))
        if url.get_backend_name() != "postgresql":
            return ()
        host, port, database = url.host or "localhost", url.port, url.database or ""
    host = "localhost" if host.lower() in LOOPBACK else host.lower()
    return ("postgresql", host, str(port or POSTGRESQL_PORT), database)


def serves(name: str, properties: Mapping[str, str], catalog: Catalog) -> bool:
    """Whether the Spark catalog ``name`` with ``properties`` reads the tables of ``catalog`` (see the module)."""
    spark_uri, uri = properties.get("uri", ""), str(catalog.properties.get("uri", ""))
    if isinstance(catalog, SqlCatalog):
        if catalog_type(properties) != "jdbc" or not database_of(uri) or database_of(spark_uri) != database_of(uri):
            return False
        if name != catalog.name:
            logger.info("Spark catalog %r reads catalog %r's database, but Iceberg's JDBC catalog reads the "
                        "tables of the catalog named like itself: name it %r to read cuts through it",
                        name, catalog.name, catalog.name)
        return name == catalog.name
    if isinstance(catalog, RestCatalog):
        warehouses = {properties.get("warehouse", ""), str(catalog.properties.get("warehouse", ""))} - {""}
        return catalog_type(properties) == "rest" and spark_uri.rstrip("/") == uri.rstrip("/") and len(warehouses) < 2
    return False


def serving_catalog(spark: SparkSession, catalog: Catalog, name: str | None = None) -> str | None:
    """The name of the session's Iceberg catalog that reads ``catalog``'s tables, ``None`` for none.

    Args:
        spark: the session.
        catalog: the group's catalog.
        name: the Spark catalog to use (default: the first, by name, that :func:`serves` ``catalog``).

    Raises:
        ConfigurationError: ``name`` is not an Iceberg catalog of the session, or is Iceberg's
            JDBC catalog under another name than ``catalog``'s (it would find none of its tables).
    """
    catalogs = iceberg_catalogs(spark)
    if name is None:
        return next((found for found, properties in catalogs.items() if serves(found, properties, catalog)), None)
    if name not in catalogs:
        raise ConfigurationError(f"catalog {catalog.name!r}: Spark catalog {name!r} is not an Iceberg catalog of the "
                                 f"session: set {CATALOG_PREFIX}{name} to {ICEBERG_CATALOG_CLASSES[0]} (with "
                                 "Iceberg's Spark runtime on the class path), or leave catalog_name out")
    if catalog_type(catalogs[name]) == "jdbc" and name != catalog.name:
        raise ConfigurationError(f"catalog {catalog.name!r}: Spark catalog {name!r} is Iceberg's JDBC catalog, which "
                                 f"reads only the tables of catalog name {name!r}: name it {catalog.name!r}")
    return name


def untagged_members(catalog: Catalog, members: Mapping[str, CutMember], tag: str) -> list[str]:
    """The members whose table (its current metadata in ``catalog``) no longer has ``tag`` at the
    member's snapshot: the cut expired under the group's retention while a reader held it."""
    untagged = []
    for name, member in sorted(members.items()):
        ref = catalog.load_table(member.table_identifier).metadata.refs.get(tag)
        if ref is None or ref.snapshot_id != member.snapshot_id:
            untagged.append(name)
    return untagged


def read_tagged(spark: SparkSession, catalog_name: str, identifier: tuple[str, ...], tag: str) -> DataFrame:
    """Table ``identifier`` (namespace, table) of Spark catalog ``catalog_name`` at its snapshot ``tag``."""
    quoted_tag = "'" + tag.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return spark.sql(f"SELECT * FROM {spark_identifier(catalog_name, *identifier)} VERSION AS OF {quoted_tag}")


def jdbc_catalog_conf(properties: Mapping[str, str], name: str | None = None) -> dict[str, str]:
    """The Spark settings of an Iceberg JDBC catalog that reads the SQL catalog of ``properties``
    (pyiceberg's, as for :func:`~airflow_provider_streambed.catalog.open_catalog`).

    The JDBC catalog is named like the catalog (``properties["name"]``, else ``streambed``), so
    that it reads its tables. The user of the SQLAlchemy URI becomes ``jdbc.user``; a password is
    never copied: give it to the cluster as ``spark.sql.catalog.<name>.jdbc.password`` from its
    secret store. Iceberg's Spark runtime and the database's JDBC driver must be on Spark's class path.

    Args:
        properties: the catalog's properties (``uri``: a PostgreSQL or SQLite SQLAlchemy URI; ``warehouse``).
        name: the Spark catalog's name (default: the catalog's).

    Raises:
        ConfigurationError: ``uri`` is not a PostgreSQL or SQLite URI.
    """
    name = name or properties.get("name", DEFAULT_CATALOG_NAME)
    url = make_url(properties["uri"])
    if url.get_backend_name() == "sqlite":
        jdbc, user = f"jdbc:sqlite:{os.path.abspath(url.database or '')}", None
    elif url.get_backend_name() == "postgresql":
        port = f":{url.port}" if url.port else ""
        jdbc, user = f"jdbc:postgresql://{url.host or 'localhost'}{port}/{url.database or ''}", url.username
    else:
        raise ConfigurationError(f"catalog {name!r}: property 'uri' names a {url.get_backend_name()} database; "
                                 "Iceberg's JDBC catalog is set up here for PostgreSQL and SQLite only")
    prefix = f"{CATALOG_PREFIX}{name}"
    conf = {prefix: ICEBERG_CATALOG_CLASSES[0], f"{prefix}.type": "jdbc", f"{prefix}.uri": jdbc,
            f"{prefix}.warehouse": properties["warehouse"]}
    return {**conf, f"{prefix}.jdbc.user": user} if user else conf

