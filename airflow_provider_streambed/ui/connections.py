"""Which catalog connections the Streambed page reads: the ones configured, else those Airflow lists.

``[streambed] catalog_conn_ids`` (comma-separated connection ids) names them outright. Without
it the page reads every ``streambed_catalog`` connection it can enumerate: those in the metadata
database and those defined as ``AIRFLOW_CONN_*`` environment variables (how Helm charts and
``make live`` define them). A secrets backend cannot be listed, only asked for a connection by id;
when one is configured the page says so and names the setting that lists its connections.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from airflow.configuration import conf
from airflow.models import Connection
from airflow.secrets.environment_variables import EnvironmentVariablesBackend
from airflow.utils.session import create_session
from sqlalchemy import select

from airflow_provider_streambed.hooks.catalog import StreambedCatalogHook

#: How Airflow names a connection defined in the environment: this prefix and the id in capitals.
ENVIRONMENT_PREFIX = "AIRFLOW_CONN_"


@dataclass(frozen=True, slots=True)
class CatalogConnections:
    """The catalog connections the page reads, and what it cannot see (``None``: nothing).

    Attributes:
        conn_ids: the connection ids, sorted.
        unlisted: why some catalog connections may be missing, and the setting that adds them.
    """

    conn_ids: tuple[str, ...]
    unlisted: str | None = None


def catalog_connections() -> CatalogConnections:
    """The connections the page reads (see the module docstring)."""
    configured = conf.get("streambed", "catalog_conn_ids", fallback="")
    if names := [name.strip() for name in configured.split(",") if name.strip()]:
        return CatalogConnections(tuple(names))
    found = set(_stored_catalog_ids()) | set(environment_catalog_ids(os.environ))
    backend = conf.get("secrets", "backend", fallback="")
    unlisted = (f"Catalog connections kept in the secrets backend {backend} are not listed here: name them in "
                "[streambed] catalog_conn_ids (AIRFLOW__STREAMBED__CATALOG_CONN_IDS)." if backend else None)
    return CatalogConnections(tuple(sorted(found)), unlisted)


def environment_catalog_ids(environment: Mapping[str, str]) -> list[str]:
    """The ids of the catalog connections defined as ``AIRFLOW_CONN_*`` variables in ``environment``.

    Each value is read as Airflow's environment backend reads it (JSON or a URI); one that does
    not read is no catalog the page can open, and is left for Airflow to report where it is used.
    """
    backend = EnvironmentVariablesBackend()
    found = []
    for name, value in environment.items():
        if not name.startswith(ENVIRONMENT_PREFIX) or name == ENVIRONMENT_PREFIX:
            continue
        conn_id = name.removeprefix(ENVIRONMENT_PREFIX).lower()
        try:
            connection = backend.deserialize_connection(conn_id, value)
        except ValueError:  # not JSON (JSONDecodeError), not a URI Airflow parses
            continue
        if connection.conn_type == StreambedCatalogHook.conn_type:
            found.append(conn_id)
    return sorted(found)


def _stored_catalog_ids() -> list[str]:
    """The catalog connections in the metadata database."""
    with create_session() as session:
        query = select(Connection.conn_id).where(Connection.conn_type == StreambedCatalogHook.conn_type)
        return list(session.scalars(query).all())
