"""Spark for tests and benchmarks: a local session configured like the refresh job, event logs,
and a standalone cluster (master and worker JVMs)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from pyspark.sql import SparkSession

from airflow_provider_streambed.refresh.spark.session import REQUIRED_CONF, quiet_py4j
from airflow_provider_streambed.refresh.spark.submit import LOCAL_CONF


def local_spark_session(app_name: str) -> SparkSession:
    """The process's ``local[2]`` Spark session with the job's required and local settings.

    Python workers run this interpreter. Like ``getOrCreate``, a session already running in the
    process is returned (with these settings applied to it where Spark allows).
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.master("local[2]").appName(app_name)
    for key, value in {**LOCAL_CONF, **REQUIRED_CONF}.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    quiet_py4j()
    return session


class EventLogs:
    """A directory Spark writes its event logs to: counts the applications started (one file each).

    Args:
        directory: the directory, created if missing.
    """

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory

    def conf(self) -> dict[str, str]:
        """The Spark configuration that makes every application log there."""
        return {"spark.eventLog.enabled": "true", "spark.eventLog.dir": self.directory.as_uri()}

    def applications(self) -> int:
        """How many applications have written an event log."""
        return len(list(self.directory.iterdir()))


class StandaloneCluster:
    """A Spark standalone master and one worker (separate JVMs) from the installed pyspark wheel.

    Use as a context manager; :attr:`master` is the ``spark://`` URL. Applications submitted to
    it run their executors in the worker's JVM, whose directories are under ``directory``.

    Args:
        directory: where the logs and the worker's application directories go.
        cores: the worker's cores.
        memory: the worker's memory, e.g. ``"1g"``.
    """

    def __init__(self, directory: Path, cores: int = 2, memory: str = "1g") -> None:
        self.directory = directory
        self.cores = cores
        self.memory = memory
        self.master = ""
        self._processes: list[subprocess.Popen[bytes]] = []

    @property
    def work_dir(self) -> Path:
        """The worker's application directories (``app-*/<executor id>/stderr``)."""
        return self.directory / "work"

    def __enter__(self) -> StandaloneCluster:
        import pyspark

        from airflow_provider_streambed.testing.postgres import free_port

        self.directory.mkdir(parents=True, exist_ok=True)
        spark_class = str(Path(sys.executable).with_name("spark-class"))
        environment = {**os.environ, "SPARK_HOME": str(Path(pyspark.__file__).parent),
                       "SPARK_WORKER_DIR": str(self.work_dir), "SPARK_LOG_DIR": str(self.directory)}
        port = free_port()
        self.master = f"spark://127.0.0.1:{port}"
        commands = {
            "master": [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                       "--port", str(port), "--webui-port", str(free_port())],
            "worker": [spark_class, "org.apache.spark.deploy.worker.Worker", self.master, "--host", "127.0.0.1",
                       "--cores", str(self.cores), "--memory", self.memory, "--webui-port", str(free_port())],
        }
        for name, command in commands.items():
            with (self.directory / f"{name}.log").open("wb") as log:
                self._processes.append(subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                                        env=environment, start_new_session=True))
            marker = "Starting Spark master" if name == "master" else "Successfully registered with master"
            self._wait_for(self.directory / f"{name}.log", marker)
        return self

    def __exit__(self, *exc_info: object) -> None:
        for process in reversed(self._processes):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=30)

    def _wait_for(self, log: Path, marker: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while marker not in log.read_text(errors="replace"):
            if time.monotonic() > deadline or any(process.poll() is not None for process in self._processes):
                self.__exit__()
                raise RuntimeError(f"Spark standalone cluster did not start: {log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.5)
