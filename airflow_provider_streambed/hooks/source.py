"""The source database hook: a psycopg connection from an Airflow ``postgres`` connection."""

from __future__ import annotations

import logging
from typing import Any

import psycopg
from airflow.sdk import BaseHook
from airflow.sdk.log import mask_secret
from psycopg.conninfo import make_conninfo

logger = logging.getLogger(__name__)

#: Connection extras passed on to libpq as connection parameters (never logged when secret).
LIBPQ_EXTRAS = ("sslmode", "sslrootcert", "sslcert", "sslkey", "connect_timeout", "application_name", "options")


class StreambedSourceHook(BaseHook):
    """Opens psycopg connections to a refresh group's source PostgreSQL database.

    The connection is an ordinary Airflow connection of type ``postgres`` (host, port, login,
    password, schema = database name; libpq options such as ``sslmode`` in the extra). The DSN
    is built only in memory and handed to psycopg: it is never logged, and the password is
    registered with Airflow's secrets masker before anything else happens.

    Args:
        source_conn_id: the Airflow connection id of the source database.
    """

    conn_name_attr = "source_conn_id"
    default_conn_name = "streambed_source_default"
    conn_type = "postgres"
    hook_name = "Streambed source (PostgreSQL)"

    def __init__(self, source_conn_id: str = default_conn_name) -> None:
        super().__init__()
        self.source_conn_id = source_conn_id
        self._conninfo: str | None = None

    @property
    def conninfo(self) -> str:
        """The libpq connection string (secret: never log it); resolved once per hook."""
        if self._conninfo is None:
            self._conninfo = conninfo_of(self.get_connection(self.source_conn_id))
        return self._conninfo

    def get_conn(self) -> psycopg.Connection[Any]:
        """A new psycopg connection to the source database (the caller closes it)."""
        logger.info("connecting to the source database of connection %s", self.source_conn_id)
        return psycopg.connect(self.conninfo)


def conninfo_of(connection: Any) -> str:
    """The libpq connection string of an Airflow connection, its password masked in logs.

    Args:
        connection: an ``airflow.sdk.Connection`` (host, port, login, password, schema, extra).
    """
    if connection.password:
        mask_secret(connection.password)
    extra = connection.extra_dejson
    parameters: dict[str, Any] = {
        "host": connection.host or None,
        "port": connection.port or None,
        "user": connection.login or None,
        "password": connection.password or None,
        "dbname": connection.schema or None,
    }
    parameters.update({key: extra[key] for key in LIBPQ_EXTRAS if key in extra})
    conninfo = make_conninfo("", **{key: value for key, value in parameters.items() if value is not None})
    mask_secret(conninfo)
    return conninfo
