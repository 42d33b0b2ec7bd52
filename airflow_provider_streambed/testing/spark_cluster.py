"""A Spark standalone cluster shaped like production: master and workers on network-namespace hosts.

The master runs on host 0 of a :class:`~airflow_provider_streambed.testing.hosts.NetworkHosts`,
worker ``i`` on host ``i + 1``; every daemon also runs in a private mount namespace with a fresh
tmpfs over ``/tmp`` (where its ``SPARK_WORKER_DIR`` and its executors live), so executors see
neither the driver's temporary files (pytest's ``tmp_path``) nor each other's, only ``/work`` and
the rest of the root filesystem (the venv's Python and the editable package). A worker's
environment is the cluster's own: the caller's ``environment`` (storage credentials, as an instance
role gives them), ``PYSPARK_PYTHON``, and S3A on the classpath (``SPARK_DIST_CLASSPATH``), as a
platform ships it. The driver runs in the root namespace and binds the bridge's address
(:meth:`NamespacedSparkCluster.driver_conf`), which is also where the hosts reach an object store.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from airflow_provider_streambed.refresh.spark.object_store import s3a_settings
from airflow_provider_streambed.testing.hosts import NetworkHosts
from airflow_provider_streambed.testing.jars import hadoop_version_of, jars, s3a_folder
from airflow_provider_streambed.testing.throwaway import Throwaway, stop_process_group

logger = logging.getLogger(__name__)

MASTER_PORT = 7077
WORKER_PORT = 7078
#: Short-lived JVMs handling kilobytes: C1 only and the serial GC (as tests/conftest.py does for spark-submit).
JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
#: Inside each daemon's private /tmp.
WORKER_DIR = "/tmp/spark-work"
MASTER_READY = "I have been elected leader! New state: ALIVE"
WORKER_READY = "Successfully registered with master"


def spark_home() -> Path:
    """The installed pyspark's directory (its ``jars/`` and ``bin/``)."""
    import pyspark

    return Path(pyspark.__file__).parent


def s3a_jars() -> list[Path]:
    """S3A's jars (``hadoop-aws``, the AWS SDK bundle) matching the installed pyspark's Hadoop."""
    return jars(s3a_folder(hadoop_version_of(spark_home())))


def object_store_conf(properties: Mapping[str, str]) -> dict[str, str]:
    """Spark settings (``spark.hadoop.*``) for the store that pyiceberg-style ``properties`` describe.

    Built by the job's own translation (:func:`~airflow_provider_streambed.refresh.spark.object_store.s3a_settings`),
    so ``s3://`` URIs work unchanged; it reads only public properties, never a key or secret.
    """
    return {f"spark.hadoop.{key}": value for key, value in s3a_settings(properties).items()}


class NamespacedSparkCluster(Throwaway):
    """A Spark standalone master and ``workers`` workers, each on its own namespaced host; a context manager.

    Args:
        directory: where the daemons' logs go (in the root namespace: ``master.log``, ``worker-<i>.log``).
        environment: the workers' cluster-side environment (e.g. ``AWS_ACCESS_KEY_ID``,
            ``AWS_SECRET_ACCESS_KEY``, ``AWS_REGION``); nothing else of this process's reaches them.
        workers: how many workers.
        cores: each worker's cores (one executor per worker of that many cores).
        memory: each worker's memory; executors get :attr:`executor_memory`.
        cluster_jars: jars on the daemons' and executors' classpath, as the platform's own (default: S3A).
        tmp_size: the size of each daemon's tmpfs ``/tmp``.
        start_timeout: seconds to wait for each daemon to be ready.
    """

    executor_memory = "512m"

    def __init__(
        self,
        directory: Path,
        environment: Mapping[str, str],
        workers: int = 2,
        cores: int = 1,
        memory: str = "1g",
        cluster_jars: Sequence[Path] | None = None,
        tmp_size: str = "1g",
        start_timeout: float = 90.0,
    ) -> None:
        self.directory = directory
        self.environment = dict(environment)
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.cluster_jars = list(s3a_jars() if cluster_jars is None else cluster_jars)
        self.tmp_size = tmp_size
        self.start_timeout = start_timeout
        self.hosts = NetworkHosts(workers + 1)
        self._processes: dict[int, subprocess.Popen[bytes]] = {}

    @property
    def address(self) -> str:
        """The bridge's address: where the driver and an object store listen for the hosts."""
        return self.hosts.address

    @property
    def master(self) -> str:
        """The master's ``spark://`` URL."""
        return f"spark://{self.hosts.hosts[0].address}:{MASTER_PORT}"

    def worker_address(self, index: int) -> str:
        """Worker ``index``'s address (the host its executors run on)."""
        return self.hosts.hosts[index + 1].address

    def driver_conf(self) -> dict[str, str]:
        """What a driver in the root namespace (spark-submit client mode or a session here) must set.

        It binds and advertises the bridge's address so that executors can connect back, has the
        cluster's jars on its own classpath (not ``spark.jars``: no copy to the executors), and waits
        for every worker's executor before scheduling. The refresh job sets its own S3A settings; another
        job adds :func:`object_store_conf` for ``s3://``.
        """
        classpath = ":".join(str(jar) for jar in self.cluster_jars)
        return {
            "spark.driver.host": self.address,
            "spark.driver.bindAddress": self.address,
            "spark.driver.extraClassPath": classpath,
            "spark.executor.cores": str(self.cores),
            "spark.cores.max": str(self.cores * self.workers),
            "spark.executor.memory": self.executor_memory,
            "spark.executor.extraJavaOptions": JVM_OPTIONS,
            "spark.pyspark.python": sys.executable,
            "spark.scheduler.minRegisteredResourcesRatio": "1.0",
            "spark.scheduler.maxRegisteredResourcesWaitingTime": "60s",
        }

    def kill_worker(self, index: int) -> None:
        """SIGKILL worker ``index``'s process group (its JVM and executors), then whatever else runs on its host."""
        process = self._processes.pop(index + 1, None)
        if process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            logger.info("Spark test cluster: killed worker %d (%s)", index, self.worker_address(index))
        self.hosts.kill_processes(index + 1)

    def start_worker(self, index: int) -> None:
        """Start worker ``index`` (on a fresh ``/tmp``) and wait until the master registered it."""
        command = ["org.apache.spark.deploy.worker.Worker", self.master, "--host", self.worker_address(index),
                   "--port", str(WORKER_PORT), "--webui-port", "8081", "--cores", str(self.cores),
                   "--memory", self.memory, "--work-dir", WORKER_DIR]
        environment = {**self._daemon_environment(index + 1), **self.environment, "SPARK_WORKER_DIR": WORKER_DIR,
                       "SPARK_DIST_CLASSPATH": ":".join(str(jar) for jar in self.cluster_jars)}
        self._start(index + 1, f"worker-{index}", command, environment, WORKER_READY)

    def restart_worker(self, index: int) -> None:
        """Kill worker ``index`` if it runs and start it again (a replaced host: its ``/tmp`` is new)."""
        self.kill_worker(index)
        self.start_worker(index)

    def executor_logs(self, index: int) -> str:
        """The ``stderr`` of every executor worker ``index`` runs now (read through its mount namespace)."""
        process = self._processes.get(index + 1)
        if process is None:
            return ""
        root = Path(f"/proc/{process.pid}/root{WORKER_DIR}")
        with contextlib.suppress(OSError):
            logs = sorted(root.glob("*/*/stderr"))
            return "\n".join(f"== {path}\n{path.read_text(errors='replace')}" for path in logs)
        return ""

    def log(self, name: str) -> str:
        """A daemon's output so far: ``"master"`` or ``"worker-<i>"``."""
        path = self.directory / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def start(self) -> NamespacedSparkCluster:
        """Make the hosts, start the master and every worker, each waited for; returns self."""
        self.directory.mkdir(parents=True, exist_ok=True)
        self.hosts.start()
        command = ["org.apache.spark.deploy.master.Master", "--host", self.hosts.hosts[0].address,
                   "--port", str(MASTER_PORT), "--webui-port", "8080"]
        self._start(0, "master", command, self._daemon_environment(0), MASTER_READY)
        for index in range(self.workers):
            self.start_worker(index)
        logger.info("Spark test cluster: master %s, %d workers, driver address %s",
                    self.master, self.workers, self.address)
        return self

    def stop(self) -> None:
        """Stop the workers, then the master (SIGTERM, SIGKILL after 10 s), and remove the hosts."""
        started = time.monotonic()
        for host in sorted(self._processes, reverse=True):
            stop_process_group(self._processes.pop(host))
        self.hosts.stop()
        logger.info("Spark test cluster: stopped in %.1f s", time.monotonic() - started)

    def _daemon_environment(self, host: int) -> dict[str, str]:
        environment = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/tmp", "LANG": "C.UTF-8",
                       "SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": self.hosts.hosts[host].address,
                       "SPARK_DAEMON_JAVA_OPTS": JVM_OPTIONS, "PYSPARK_PYTHON": sys.executable}
        if "JAVA_HOME" in os.environ:
            environment["JAVA_HOME"] = os.environ["JAVA_HOME"]
        return environment

    def _start(self, host: int, name: str, command: list[str], environment: Mapping[str, str], ready: str) -> None:
        log_path = self.directory / f"{name}.log"
        offset = log_path.stat().st_size if log_path.exists() else 0
        spark_class = str(spark_home() / "bin" / "spark-class")
        with log_path.open("ab") as log:
            process = self.hosts.spawn(host, [spark_class, *command], environment, log, private_tmp=self.tmp_size)
        self._processes[host] = process
        deadline = time.monotonic() + self.start_timeout
        while ready not in log_path.read_bytes()[offset:].decode("utf-8", errors="replace"):
            if process.poll() is not None or time.monotonic() > deadline:
                state = f"exited with code {process.returncode}" if process.poll() is not None else "timed out"
                output = log_path.read_bytes()[offset:].decode("utf-8", errors="replace")[-3000:]
                address = self.hosts.hosts[host].address
                raise RuntimeError(f"Spark {name} on {address} {state} while starting:\n{output}")
            time.sleep(0.2)
