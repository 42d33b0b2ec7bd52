"""Naming the dependency behind a failure: the source database, the catalog database, the warehouse, Spark.

A dependency that is down surfaces as its driver's own exception (psycopg's, SQLAlchemy's, an
``OSError`` from pyarrow): it says what broke, not which of the run's dependencies it was.
:func:`naming_dependencies` re-raises those as a :class:`~.exceptions.DependencyError` that
names the dependency by what is safe to show (host, port, database, path; never a password or a
whole connection URI). :func:`check_spark_reachable` tries the Spark master's port before a job
is submitted, since spark-submit itself keeps retrying an absent master for a minute.
"""

from __future__ import annotations

import errno
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlparse

import psycopg
import sqlalchemy.exc
from psycopg.conninfo import conninfo_to_dict
from sqlalchemy.engine import make_url

from airflow_provider_streambed.exceptions import (
    CatalogUnavailableError,
    SourceUnavailableError,
    SparkUnavailableError,
    WarehouseError,
)

#: ``errno`` values of a write the warehouse refuses.
UNWRITABLE = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.EROFS})
#: SQLSTATEs of a connection the server ended or refused (besides class 08, connection exceptions).
SERVER_GONE = frozenset({"57P01", "57P02", "57P03"})  # admin shutdown, crash shutdown, cannot connect now
#: Default ports of Spark masters by URL scheme.
SPARK_PORTS = {"spark": 7077, "sc": 15002}
#: Seconds to wait for a Spark master's port.
SPARK_CONNECT_TIMEOUT = 10.0


def connection_lost(error: psycopg.Error) -> bool:
    """Whether ``error`` means the connection failed or was lost, not that a statement failed (nor a
    client-side error, such as a value psycopg cannot load, which has no SQLSTATE either)."""
    if not isinstance(error, psycopg.OperationalError | psycopg.InterfaceError):
        return False
    state = error.sqlstate
    return state is None or state.startswith("08") or state in SERVER_GONE


def describe_source(conninfo: str) -> str:
    """``host:port/database`` of a libpq connection string (no user, no password)."""
    params = conninfo_to_dict(conninfo)
    return f"{params.get('host') or 'localhost'}:{params.get('port') or 5432}/{params.get('dbname') or ''}"


def describe_catalog(uri: str) -> str:
    """The backend and place of a SQLAlchemy URI, e.g. ``postgresql at db:5432/catalog`` (no credentials)."""
    url = make_url(uri)
    if url.host:
        return f"{url.get_backend_name()} at {url.host}:{url.port or ''}/{url.database or ''}"
    return f"{url.get_backend_name()} {url.database or '(in memory)'}"


def _first_line(error: BaseException | None) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


@contextmanager
def naming_dependencies(
    *, source: str | None = None, catalog: str | None = None, warehouse: str | None = None
) -> Iterator[None]:
    """Re-raise a dependency's failure inside the block as a :class:`~.exceptions.DependencyError`.

    Args:
        source: how to name the source database (e.g. ``connection 'bank_pg'`` or
            :func:`describe_source`); ``None``: psycopg errors pass unchanged.
        catalog: how to name the catalog database; ``None``: SQLAlchemy errors pass unchanged.
        warehouse: the warehouse URI; ``None``: ``OSError``\\ s pass unchanged.

    Raises:
        SourceUnavailableError: a psycopg connection failed or was lost (a statement's own
            error, such as a lock timeout, passes unchanged).
        CatalogUnavailableError: the catalog database failed a statement at the driver level
            (SQLAlchemy's ``OperationalError``: unreachable, lost, locked, cannot open).
        WarehouseError: a write was refused: no space, quota, permission, read-only.
    """
    try:
        yield
    except psycopg.Error as error:
        if source is None or not connection_lost(error):
            raise
        raise SourceUnavailableError(
            f"the source database ({source}) is unreachable or lost the connection: {_first_line(error)}; "
            "retry when it is back"
        ) from error
    except sqlalchemy.exc.OperationalError as error:
        if catalog is None:
            raise
        raise CatalogUnavailableError(
            f"the catalog database ({catalog}) failed: {_first_line(error.orig)}; retry when it is back (a "
            "publish whose commit was cut off is reconciled by the retry)"
        ) from error
    except OSError as error:
        if warehouse is None or error.errno not in UNWRITABLE or not _in_warehouse(error, warehouse):
            raise
        raise WarehouseError(
            f"the warehouse {warehouse} refuses writes: {os.strerror(error.errno)}; free space or fix its "
            "permissions, then retry"
        ) from error


def _in_warehouse(error: OSError, warehouse: str) -> bool:
    """Whether ``error`` may be about the warehouse: pyarrow's errors name no file, others do (a
    ``spark-submit`` that may not be executed is not the warehouse's fault)."""
    if error.filename is None:
        return True
    return str(error.filename).startswith(urlparse(warehouse).path or warehouse)


def describe_remote(url: str, connection: str | None = None) -> str:
    """Scheme, hosts and ports of a Spark URL, without the parameters of an ``sc://`` URL (a token
    among them), and the Airflow connection it came from, if any."""
    parsed = urlparse(url)
    return f"{parsed.scheme}://{parsed.netloc}" + (f" (connection {connection!r})" if connection else "")


def check_spark_reachable(master: str, connection: str | None = None) -> None:
    """Fail fast when no host of a ``spark://`` master list or ``sc://`` server accepts a connection.

    Other masters (``local[...]``, ``yarn``, ``k8s://...``) are not checked.

    Args:
        master: the master URL (``spark://h1:7077,h2:7077``, ``sc://host:port/;token=...``).
        connection: the Airflow connection it came from, named in the error (:func:`describe_remote`).

    Raises:
        SparkUnavailableError: no host accepted a TCP connection within 10 s.
    """
    parsed = urlparse(master)
    if parsed.scheme not in SPARK_PORTS:
        return
    where = describe_remote(master, connection)
    kind = "Spark Connect server" if parsed.scheme == "sc" else "Spark master"
    last: OSError | ValueError | None = None
    for endpoint in parsed.netloc.split(","):  # a standalone master may list several hosts
        try:
            address = urlparse(f"//{endpoint}")  # brackets of an IPv6 host, a missing port
            with socket.create_connection((address.hostname or "localhost", address.port or SPARK_PORTS[parsed.scheme]),
                                          timeout=SPARK_CONNECT_TIMEOUT):
                return
        except (OSError, ValueError) as error:  # ValueError: a port that is not a number
            last = error
    raise SparkUnavailableError(f"the {kind} {where} cannot be reached: {last}; nothing was submitted")
