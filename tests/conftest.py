"""Shared fixtures: a real throwaway PostgreSQL cluster, fresh databases, catalog databases, a Spark Connect
server, a virtualenv whose pyspark has an Iceberg Spark runtime.

Airflow's home is set to a temporary directory before anything imports Airflow, so tests never
touch a user's Airflow installation. Every Spark JVM the tests start (spark-submit, the Spark
Connect server, in-process sessions) compiles with C1 only and collects with the serial GC: these
JVMs live seconds and handle kilobytes, and C2's compiler threads roughly doubled their CPU time
on the suite's two cores. A session that runs slow tests also archives the classes Spark loads
(class data sharing) once, so that each later JVM maps them instead of loading them from the jars.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest

_AIRFLOW_HOME = tempfile.mkdtemp(prefix="streambed-airflow-home-")
os.environ.setdefault("AIRFLOW_HOME", _AIRFLOW_HOME)
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
os.environ.setdefault("AIRFLOW__CORE__UNIT_TEST_MODE", "True")
os.environ.setdefault("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")

from airflow_provider_streambed.refresh.spark.connect_server import ConnectServer  # noqa: E402
from airflow_provider_streambed.testing.postgres import ThrowawayCluster, free_port  # noqa: E402
from airflow_provider_streambed.testing.spark_envs import (  # noqa: E402
    ICEBERG_RUNTIME_PYSPARK,
    connect_server_conf,
    spark_env_python,
)

WARM_UP_JOB = Path(__file__).with_name("spark_warmup_job.py")


@pytest.fixture(scope="session", autouse=True)
def spark_class_archive(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Spark's classes archived once for every Spark JVM of a session that runs slow tests.

    A warm-up job (:mod:`tests.spark_warmup_job`) writes a dynamic class-data-sharing archive at
    exit; ``SPARK_SUBMIT_OPTS`` then names it, which takes about 5 s off each later spark-submit
    (of 10 to 15 s). Without the archive (the warm-up failed) the JVMs load their classes as before.
    """
    if not any(item.get_closest_marker("slow") for item in request.session.items):
        yield
        return
    directory = tmp_path_factory.mktemp("spark-classes")
    archive = directory / "spark.jsa"
    options = os.environ.get("SPARK_SUBMIT_OPTS", "")
    environment = {**os.environ, "PYSPARK_PYTHON": sys.executable,
                   "SPARK_SUBMIT_OPTS": f"{options} -XX:ArchiveClassesAtExit={archive}"}
    with contextlib.suppress(subprocess.TimeoutExpired):
        subprocess.run([str(Path(sys.executable).with_name("spark-submit")), "--master", "local[2]",
                        str(WARM_UP_JOB), str(directory)], env=environment, capture_output=True, check=False,
                       timeout=300)
    if archive.exists():  # -Xlog: a JVM whose class path differs uses no archive and says nothing
        os.environ["SPARK_SUBMIT_OPTS"] = (f"{options} -Xlog:cds=off -Xlog:cds+dynamic=off "
                                           f"-XX:SharedArchiveFile={archive}")
    yield
    os.environ["SPARK_SUBMIT_OPTS"] = options
    archive.unlink(missing_ok=True)  # about 170 MB


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
    server = ConnectServer(port=free_port(), state_dir=tmp_path_factory.mktemp("spark-connect"),
                           conf=connect_server_conf(pyspark.__version__))
    with server.running() as url:
        yield url


@pytest.fixture(scope="session")
def iceberg_runtime_python() -> Path:
    """The python of a virtualenv whose pyspark has an Iceberg Spark runtime (``.venvs/pyspark-4.1.4``).

    Made on first use by :func:`~airflow_provider_streambed.testing.spark_envs.spark_env_python`
    and kept across sessions: about two minutes the first time (pyspark's download and wheel
    build, then the package's dependencies), a millisecond after.
    """
    return spark_env_python(ICEBERG_RUNTIME_PYSPARK)
