"""Shared fixtures: a real throwaway PostgreSQL cluster, fresh databases, catalog databases, a Spark Connect server.

Airflow's home is set to a temporary directory before anything imports Airflow, so tests never
touch a user's Airflow installation. Every Spark JVM the tests start (spark-submit, the Spark
Connect server, in-process sessions) compiles with C1 only and collects with the serial GC: these
JVMs live seconds and handle kilobytes, and C2's compiler threads roughly doubled their CPU time
on the suite's two cores.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

_AIRFLOW_HOME = tempfile.mkdtemp(prefix="streambed-airflow-home-")
os.environ.setdefault("AIRFLOW_HOME", _AIRFLOW_HOME)
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
os.environ.setdefault("AIRFLOW__CORE__UNIT_TEST_MODE", "True")
os.environ.setdefault("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")

from airflow_provider_streambed.connect_server import ConnectServer  # noqa: E402
from airflow_provider_streambed.testing.postgres import ThrowawayCluster, free_port  # noqa: E402


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[ThrowawayCluster]:
    """One real PostgreSQL cluster (wal_level=logical) for the whole test session."""
    with ThrowawayCluster() as cluster:
        yield cluster


@pytest.fixture
def pg_dsn(pg_cluster: ThrowawayCluster) -> Iterator[str]:
    """The DSN of a fresh database on the session's cluster, dropped after the test."""
    name = pg_cluster.create_database()
    yield pg_cluster.dsn(name)
    pg_cluster.drop_database(name)


@pytest.fixture
def sqlite_catalog_uri(tmp_path: Path) -> str:
    """An SQLAlchemy URI of a fresh SQLite catalog database."""
    return f"sqlite:///{tmp_path / 'catalog.db'}"


@pytest.fixture
def postgres_catalog_uri(pg_cluster: ThrowawayCluster) -> Iterator[str]:
    """An SQLAlchemy URI of a fresh PostgreSQL catalog database on the session's cluster."""
    name = pg_cluster.create_database()
    yield f"postgresql+psycopg://streambed@127.0.0.1:{pg_cluster.port}/{name}"
    pg_cluster.drop_database(name)


@pytest.fixture(params=["sqlite", "postgres"])
def catalog_uri(request: pytest.FixtureRequest) -> str:
    """A fresh catalog database URI, once on SQLite and once on PostgreSQL."""
    return str(request.getfixturevalue(f"{request.param}_catalog_uri"))


@pytest.fixture(scope="session")
def spark_connect_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real Spark Connect server (``local[2]``) for the whole test session; yields its URL."""
    server = ConnectServer(port=free_port(), state_dir=tmp_path_factory.mktemp("spark-connect"))
    yield server.start()
    # The server is this process's child: once it exits it stays a zombie, which ConnectServer.stop
    # (made for a server started by another process) takes as running for its whole 30 s timeout.
    pid = server.running_pid()
    if pid is not None:
        threading.Thread(target=reap, args=(pid,), daemon=True).start()
    server.stop()


def reap(pid: int) -> None:
    """Wait for the child process ``pid`` to exit and collect its exit status."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)
