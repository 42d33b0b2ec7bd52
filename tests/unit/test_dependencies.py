"""Which driver errors name a dependency, how dependencies are named, and the Spark master probe."""

from __future__ import annotations

import errno
import socket
from collections.abc import Iterator

import psycopg
import pytest

from airflow_provider_streambed.dependencies import (
    check_spark_reachable,
    connection_lost,
    describe_catalog,
    describe_source,
    naming_dependencies,
)
from airflow_provider_streambed.exceptions import SourceUnavailableError, SparkUnavailableError, WarehouseError


def test_only_connection_failures_count_as_a_lost_source() -> None:
    assert connection_lost(psycopg.OperationalError("connection refused"))
    assert connection_lost(psycopg.errors.AdminShutdown("terminating connection"))
    assert not connection_lost(psycopg.errors.QueryCanceled("statement timeout"))
    assert not connection_lost(psycopg.DataError("date too large"))  # client-side, no SQLSTATE either
    assert not connection_lost(psycopg.ProgrammingError("the query has 1 placeholder but 2 parameters"))
    with pytest.raises(psycopg.DataError), naming_dependencies(source="db:5432/x"):
        raise psycopg.DataError("date too large")
    with pytest.raises(SourceUnavailableError, match=r"the source database \(db:5432/x\) is unreachable"), \
            naming_dependencies(source="db:5432/x"):
        raise psycopg.OperationalError("connection refused")


def test_dependencies_are_named_without_credentials() -> None:
    assert describe_source("host=db port=6432 user=u password=s3cret dbname=shop") == "db:6432/shop"
    assert describe_catalog("postgresql+psycopg://u:s3cret@cat:5432/lake") == "postgresql at cat:5432/lake"
    assert describe_catalog("sqlite:////data/catalog.db") == "sqlite /data/catalog.db"


def test_only_a_refused_write_under_the_warehouse_is_the_warehouse() -> None:
    with pytest.raises(WarehouseError, match="warehouse file:///data/wh refuses writes: No space left on device"), \
            naming_dependencies(warehouse="file:///data/wh"):
        raise OSError(errno.ENOSPC, "Error writing bytes to file")  # pyarrow names no file
    with pytest.raises(PermissionError), naming_dependencies(warehouse="file:///data/wh"):
        raise PermissionError(errno.EACCES, "Permission denied", "/usr/bin/spark-submit")


@pytest.fixture
def ipv6_listener() -> Iterator[int]:
    try:
        server = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        server.bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback here")
    server.listen()
    with server:
        yield server.getsockname()[1]


def test_an_ipv6_master_is_probed_by_its_host(ipv6_listener: int) -> None:
    check_spark_reachable(f"sc://[::1]:{ipv6_listener}/;token=x")
    check_spark_reachable(f"spark://[::1]:{ipv6_listener}")
    with pytest.raises(SparkUnavailableError, match=r"the Spark master spark://\[::1\]:x cannot be reached"):
        check_spark_reachable("spark://[::1]:x")
