"""A local Spark Connect server from the installed pyspark wheel, for users and tests.

:class:`ConnectServer` starts ``org.apache.spark.sql.connect.service.SparkConnectServer`` with the
venv's ``spark-submit`` in the background (its own process group, a pid file and a log file in a
state directory), waits until it accepts connections, and stops it. The server runs the job's
settings (UTC session time zone, microsecond Parquet timestamps) and, for Python UDFs, this
interpreter. It sees the local file system, so file warehouses work as they are. ``streambed
spark-connect start|stop`` is its command line.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from airflow_provider_streambed.exceptions import RefreshError

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
DEFAULT_PORT = 15002
DEFAULT_STATE_DIR = Path.home() / ".streambed" / "spark-connect"
#: Settings of the server (the refresh job also sets its own per session).
SERVER_CONF = {
    "spark.ui.enabled": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.sql.timeType.enabled": "true",
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.adaptive.enabled": "true",
}


@dataclass(frozen=True)
class ConnectServer:
    """A Spark Connect server on this machine.

    Attributes:
        port: the gRPC port (default 15002, Spark's).
        master: the Spark master of the server (default ``local[2]``).
        state_dir: where the pid file and the log live.
        conf: extra Spark settings.
        environment: extra environment variables of the server process, over this process's: what
            the cluster side holds and the refresh's caller does not (an object store's credentials,
            as an instance role gives them).
    """

    port: int = DEFAULT_PORT
    master: str = "local[2]"
    state_dir: Path = DEFAULT_STATE_DIR
    conf: Mapping[str, str] = field(default_factory=dict)
    environment: Mapping[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        """The client URL, ``sc://localhost:<port>``."""
        return f"sc://localhost:{self.port}"

    @property
    def pid_file(self) -> Path:
        """The pid file of a running server."""
        return self.state_dir / f"server-{self.port}.pid"

    @property
    def log_file(self) -> Path:
        """The server's output."""
        return self.state_dir / f"server-{self.port}.log"

    def command(self) -> list[str]:
        """The spark-submit command line that runs the server."""
        executable = shutil.which("spark-submit") or str(Path(sys.executable).with_name("spark-submit"))
        command = [executable, "--class", SERVER_CLASS, "--master", self.master]
        settings = {**SERVER_CONF, **self.conf, "spark.connect.grpc.binding.port": str(self.port)}
        for key, value in settings.items():
            command += ["--conf", f"{key}={value}"]
        return [*command, "spark-internal"]

    def running_pid(self) -> int | None:
        """The pid of this server if its process is alive, else ``None``."""
        try:
            pid = int(self.pid_file.read_text())
        except (FileNotFoundError, ValueError):
            return None
        return pid if _alive(pid) else None

    def accepts_connections(self) -> bool:
        """Whether something listens on the port."""
        with socket.socket() as probe:
            probe.settimeout(1)
            return probe.connect_ex(("localhost", self.port)) == 0

    def start(self, timeout: float = 120) -> str:
        """Start the server (unless it runs already) and wait until it listens; returns its URL.

        Raises:
            RefreshError: the server exited or did not listen within ``timeout`` seconds (the
                message ends with its last log lines).
        """
        if self.running_pid() is not None and self.accepts_connections():
            return self.url
        self.state_dir.mkdir(parents=True, exist_ok=True)
        environment = {**os.environ, **self.environment, "PYSPARK_PYTHON": sys.executable,
                       "PYSPARK_DRIVER_PYTHON": sys.executable}
        with self.log_file.open("wb") as log:
            process = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT, env=environment,
                                       start_new_session=True)
        self.pid_file.write_text(str(process.pid))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RefreshError(f"the Spark Connect server on port {self.port} exited "
                                   f"(code {process.returncode}): {self._log_tail()}")
            if self.accepts_connections():
                return self.url
            time.sleep(0.5)
        self.stop()
        raise RefreshError(f"the Spark Connect server on port {self.port} did not listen within {timeout:.0f} s: "
                           f"{self._log_tail()}")

    @contextlib.contextmanager
    def running(self) -> Iterator[str]:
        """The server started for a ``with`` block (its URL), and stopped when the block ends."""
        try:
            yield self.start()
        finally:
            self.stop()

    def stop(self, timeout: float = 30) -> bool:
        """Stop the server (its whole process group; a server this process started is reaped, not left a
        zombie); ``False`` if it was not running."""
        pid = self.running_pid()
        self.pid_file.unlink(missing_ok=True)
        if pid is None:
            return False
        os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not _alive(pid):
                return True
            time.sleep(0.2)
        os.killpg(pid, signal.SIGKILL)
        _reap(pid, 0)
        return True

    def _log_tail(self, lines: int = 5) -> str:
        text = self.log_file.read_text(errors="replace") if self.log_file.exists() else ""
        return " | ".join(text.strip().splitlines()[-lines:])


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a child of this process that exited is reaped first)."""
    _reap(pid, os.WNOHANG)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _reap(pid: int, options: int) -> None:
    """Collect the exit status of ``pid`` if it is a child of this process (a server it started)
    that exited (``os.WNOHANG``) or once it exits (``0``). Until then an exited child is a zombie,
    which takes signals as a running process does; another process's child is its parent's to reap."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, options)
