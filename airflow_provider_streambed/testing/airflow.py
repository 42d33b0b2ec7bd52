"""A real local Airflow for the demos and tests: its environment, and its components as processes.

The environment points the ``airflow`` subprocesses at a home of their own, a metadata database
(SQLite, or one on a throwaway PostgreSQL cluster), the source, catalog and Spark connections as
``AIRFLOW_CONN_*`` variables, and Spark settings for ``local[2]`` jobs. :func:`server_env` adds what
a scheduled deployment needs (LocalExecutor, the execution API's URL, one JWT secret), and
:func:`components` runs ``airflow api-server``, ``scheduler``, ``dag-processor`` and ``triggerer``
until :func:`wait_until_healthy` sees them report.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from airflow_provider_streambed.refresh.spark.submit import LOCAL_CONF
from airflow_provider_streambed.testing.postgres import ThrowawayCluster

BIN = Path(sys.executable).parent
#: Spark settings for the demo's ``local[2]`` jobs (``spark-defaults.conf``): the example DAG sets none.
SPARK_DEFAULTS = {**LOCAL_CONF, "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"}
COMPONENTS = ("scheduler", "dag-processor", "triggerer")


def airflow_env(directory: Path, dags: Path, cluster: ThrowawayCluster, dbname: str, catalog: dict[str, str],
                metadata_db: str | None = None) -> dict[str, str]:
    """The environment of the ``airflow`` subprocesses: home under ``directory``, metadata database
    (SQLite, or ``metadata_db`` on the cluster), connections, Spark."""
    home = directory / "airflow"
    spark_conf_dir = directory / "spark-conf"
    spark_conf_dir.mkdir(parents=True, exist_ok=True)
    (spark_conf_dir / "spark-defaults.conf").write_text(
        "".join(f"{key} {value}\n" for key, value in SPARK_DEFAULTS.items()))
    env = dict(os.environ)
    env.update({
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}" if metadata_db is None
        else f"postgresql+psycopg://streambed@127.0.0.1:{cluster.port}/{metadata_db}",
        "AIRFLOW_CONN_BANK_PG": json.dumps({"conn_type": "postgres", "host": "127.0.0.1", "port": cluster.port,
                                            "login": "streambed", "schema": dbname}),
        "AIRFLOW_CONN_LAKEHOUSE": json.dumps({"conn_type": "streambed_catalog", "extra": catalog}),
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
        "PATH": os.pathsep.join([str(BIN), env.get("PATH", "")]),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_CONF_DIR": str(spark_conf_dir),
    })
    if metadata_db is not None:  # Airflow's API server and triggerer need an async driver: psycopg's
        env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_ASYNC"] = (
            f"postgresql+psycopg_async://streambed@127.0.0.1:{cluster.port}/{metadata_db}")
    return env


def server_env(port: int) -> dict[str, str]:
    """Settings of a scheduled deployment whose api-server listens on ``port`` (add them to
    :func:`airflow_env`'s): the LocalExecutor, the execution API's URL and one JWT secret for all
    components, DAGs active from their first parse (an Asset's watcher runs only while its DAG is
    active), the DAG folder listed every 5 s."""
    return {
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
        "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(16),
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
    }


@contextmanager
def components(env: dict[str, str], port: int, log_dir: Path,
               names: Sequence[str] = COMPONENTS) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Airflow's api-server and ``names`` (default: scheduler, dag-processor and triggerer), each
    logging to ``<log_dir>/<name>.log``; stopped (SIGTERM to each process group, then SIGKILL) at the end."""
    commands = {"api-server": ["api-server", "--host", "127.0.0.1", "--port", str(port)],
                **{name: [name] for name in names}}
    started = []
    try:
        for name, arguments in commands.items():
            with (log_dir / f"{name}.log").open("wb") as log:  # the child keeps its own descriptor
                started.append(subprocess.Popen([str(BIN / "airflow"), *arguments], env=env, stdout=log,
                                                stderr=subprocess.STDOUT, start_new_session=True))
        yield started
    finally:
        for process in started:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in started:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def wait_until_healthy(url: str, started: Sequence[subprocess.Popen[bytes]], names: Sequence[str] = COMPONENTS,
                       timeout: float = 180.0) -> None:
    """Poll the api-server at ``url`` until its health report has ``names`` healthy (``dag-processor``
    is reported as ``dag_processor``).

    Raises:
        RuntimeError: a process of ``started`` exited, or ``timeout`` seconds passed; the last
            report (or the api-server's error) in the message.
    """
    wanted = {name.replace("-", "_") for name in names}
    deadline, report = time.monotonic() + timeout, "no answer yet"
    while True:
        try:
            with urllib.request.urlopen(f"{url}/api/v2/monitor/health", timeout=5) as response:
                health = json.load(response)
            report = json.dumps(health)
            if all(health.get(name, {}).get("status") == "healthy" for name in wanted):
                return
        except OSError as error:
            report = f"api-server: {error}"
        exited = [process.args for process in started if process.poll() is not None]
        if exited or time.monotonic() > deadline:
            raise RuntimeError(f"Airflow at {url} is not healthy ({', '.join(sorted(wanted))}): "
                               f"{'exited: ' + str(exited) if exited else f'{timeout:.0f} s passed'}; {report}")
        time.sleep(0.5)
