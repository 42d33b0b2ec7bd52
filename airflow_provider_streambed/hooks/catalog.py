"""The catalog hook: pyiceberg catalog properties from an Airflow connection.

Two connection types. The apache-iceberg provider's ``iceberg`` type names a REST catalog, read
the way its ``IcebergHook`` reads it: ``extra`` holds the pyiceberg properties, the host is the
catalog URI, login and password an OAuth2 client id and secret (``credential``). Streambed needs
the properties themselves (Spark jobs and staging use them), while ``IcebergHook`` only hands out
the opened catalog, so the mapping is repeated here rather than the hook reused. Such a connection
also names the ledger's database (``streambed.ledger-uri``) and the staging location
(``streambed.staging-uri``) in its extra.

Connection type ``streambed_catalog`` is a SQL catalog (the ledger lives in its database).
Fields:

- ``extra.uri``: the SQLAlchemy URI of the catalog database (``sqlite:////data/catalog.db``),
  or else host, port, login, password and schema (database name) with ``extra.driver``
  (default ``postgresql+psycopg``);
- ``extra.warehouse`` (required): the warehouse URI (``file:///data/warehouse``, ``s3://...``);
- ``extra.catalog_name`` (default ``streambed``) and ``extra.properties``: further pyiceberg
  catalog properties (e.g. ``s3.endpoint``).
"""

from __future__ import annotations

import logging
from typing import Any

from airflow.sdk import BaseHook
from airflow.sdk.log import mask_secret
from pyiceberg.catalog import Catalog
from sqlalchemy.engine import URL

from airflow_provider_streambed.catalog import (
    DEFAULT_CATALOG_NAME,
    LEDGER_URI_PROPERTY,
    STAGING_URI_PROPERTY,
    open_catalog,
    open_with_ledger,
)
from airflow_provider_streambed.exceptions import ConnectionConfigError
from airflow_provider_streambed.ledger import Ledger
from airflow_provider_streambed.storage import SECRET_WORDS

logger = logging.getLogger(__name__)

DEFAULT_DRIVER = "postgresql+psycopg"
#: The apache-iceberg provider's connection type (a REST catalog).
ICEBERG_CONNECTION_TYPE = "iceberg"


class StreambedCatalogHook(BaseHook):
    """Turns an Airflow connection into pyiceberg catalog properties and opens the catalog.

    Args:
        catalog_conn_id: the Airflow connection id of the catalog.
    """

    conn_name_attr = "catalog_conn_id"
    default_conn_name = "streambed_catalog_default"
    conn_type = "streambed_catalog"
    hook_name = "Streambed Iceberg SQL catalog"

    def __init__(self, catalog_conn_id: str = default_conn_name) -> None:
        super().__init__()
        self.catalog_conn_id = catalog_conn_id
        self._properties: dict[str, str] | None = None

    @property
    def properties(self) -> dict[str, str]:
        """pyiceberg catalog properties (``uri`` may hold a password: never log them)."""
        if self._properties is None:
            self._properties = catalog_properties_of(self.catalog_conn_id, self.get_connection(self.catalog_conn_id))
        return self._properties

    def get_conn(self) -> Catalog:
        """Open the catalog (``catalog.open_catalog``)."""
        logger.info("opening the catalog of connection %s", self.catalog_conn_id)
        return open_catalog(self.properties)

    def get_catalog_and_ledger(self, *, create: bool = True) -> tuple[Catalog, Ledger]:
        """Open the catalog and the run ledger in its database (``catalog.open_with_ledger``).

        Args:
            create: create the ledger's tables when missing; ``False`` for a reader that must not write.
        """
        logger.info("opening the catalog of connection %s", self.catalog_conn_id)
        return open_with_ledger(self.properties, create=create)

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        """Relabel the connection form for a catalog database."""
        return {
            "hidden_fields": [],
            "relabeling": {"schema": "Database"},
            "placeholders": {
                "extra": '{"warehouse": "file:///data/warehouse", "uri": "sqlite:////data/catalog.db"}',
                "host": "catalog database host (or set extra.uri)",
            },
        }


def catalog_properties_of(conn_id: str, connection: Any) -> dict[str, str]:
    """Catalog properties of an Airflow connection; its password is masked in logs.

    Raises:
        ConnectionConfigError: no warehouse, or neither ``extra.uri`` nor a host.
    """
    extra = connection.extra_dejson
    if connection.password:
        mask_secret(connection.password)
    if connection.conn_type == ICEBERG_CONNECTION_TYPE:
        return rest_properties_of(conn_id, connection)
    warehouse = extra.get("warehouse")
    if not warehouse:
        raise ConnectionConfigError(f"catalog connection {conn_id!r}: extra 'warehouse' (a URI) is required")
    uri = extra.get("uri")
    if not uri:
        if not connection.host:
            raise ConnectionConfigError(
                f"catalog connection {conn_id!r}: set extra 'uri' (an SQLAlchemy URI) or host and schema"
            )
        uri = URL.create(
            str(extra.get("driver", DEFAULT_DRIVER)),
            username=connection.login or None,
            password=connection.password or None,
            host=connection.host,
            port=connection.port or None,
            database=connection.schema or None,
        ).render_as_string(hide_password=False)
    mask_secret(uri)
    properties = {str(key): str(value) for key, value in dict(extra.get("properties", {})).items()}
    properties.update(name=str(extra.get("catalog_name", DEFAULT_CATALOG_NAME)), uri=str(uri), warehouse=warehouse)
    return properties


def rest_properties_of(conn_id: str, connection: Any) -> dict[str, str]:
    """Catalog properties of an ``iceberg`` connection (see the module docstring); secrets masked.

    Raises:
        ConnectionConfigError: no catalog URI, or no ``streambed.ledger-uri`` or ``streambed.staging-uri``.
    """
    properties = {str(key): str(value) for key, value in connection.extra_dejson.items()}
    if connection.host:
        properties["uri"] = connection.host.rstrip("/")
    properties.setdefault("type", "rest")
    properties.setdefault("name", conn_id)
    if properties["type"] == "rest" and connection.login and connection.password:
        properties["credential"] = f"{connection.login}:{connection.password}"
        mask_secret(properties["credential"])
    for key in ("uri", LEDGER_URI_PROPERTY, STAGING_URI_PROPERTY):
        if not properties.get(key):
            where = "the host (the catalog URI)" if key == "uri" else f"extra {key!r}"
            raise ConnectionConfigError(
                f"catalog connection {conn_id!r} (type {ICEBERG_CONNECTION_TYPE!r}): set {where}"
            )
    for key, value in properties.items():
        if any(word in key for word in SECRET_WORDS) or key == LEDGER_URI_PROPERTY:
            mask_secret(value)
    return properties
