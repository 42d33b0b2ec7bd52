"""A throwaway Nessie server (an Iceberg REST catalog whose multi-table commit is one Nessie commit), for tests.

It runs Nessie's runner jar (:data:`~.jars.NESSIE`) in a temporary directory with the in-memory
version store, listens on free ports on 127.0.0.1 only, and is removed on
:meth:`ThrowawayNessie.stop`. The warehouse is a plain bucket (:attr:`ThrowawayNessie.bucket`)
on the S3 of a :class:`~.seaweed.ThrowawaySeaweed`, its own unless one is given (SeaweedFS's
table bucket takes only its own catalog's tables).

Nessie's settings are in ``config/application.properties`` of the server's directory (Quarkus
reads it from the working directory). The S3 credentials are not among them, nor on the command
line: Nessie resolves the secret ``urn:nessie-secret:quarkus:streambed.s3`` from the Quarkus
configuration, which finds it in the environment variable ``STREAMBED_S3`` of the server's process.

Each test can work on a branch of its own (:meth:`ThrowawayNessie.create_branch`): the catalog's
URI names the branch (``/iceberg/<branch>``), so one server serves many isolated catalogs.
Nessie 0.99.0's jar needs Java 21 or newer: ``STREAMBED_NESSIE_JAVA_HOME``, else the newest found.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

from airflow_provider_streambed.testing.jars import NESSIE, jars
from airflow_provider_streambed.testing.java import find_java
from airflow_provider_streambed.testing.postgres import free_port
from airflow_provider_streambed.testing.seaweed import REGION, ThrowawaySeaweed
from airflow_provider_streambed.testing.throwaway import Throwaway, stop_process_group

logger = logging.getLogger(__name__)

#: The oldest Java that runs Nessie 0.99.0's jar (its classes are built for Java 21).
MIN_JAVA = 21
#: The Java home to run Nessie with, when set (else one is looked for: :func:`~.java.find_java`).
JAVA_HOME_ENV = "STREAMBED_NESSIE_JAVA_HOME"
#: The Quarkus configuration key of the S3 credentials secret (JSON with ``name`` and ``secret``).
S3_SECRET = "streambed.s3"
#: The environment variable Quarkus reads :data:`S3_SECRET` from.
S3_SECRET_ENV = "STREAMBED_S3"
#: Starts tried with newly chosen ports when another process took a chosen port first.
PORT_ATTEMPTS = 3
#: What Quarkus logs when a port it was given is taken ("Port 8080 seems to be in use by another process").
PORT_TAKEN = "seems to be in use by another process"
#: Characters a Nessie branch name may hold (it also starts with a letter).
BRANCH_CHARACTERS = re.compile(r"[^A-Za-z0-9_-]+")


def branch_name(text: str) -> str:
    """A valid Nessie branch name made of ``text`` (a test's name, say)."""
    name = BRANCH_CHARACTERS.sub("-", text).strip("-")
    return name if name[:1].isalpha() else f"b-{name}"


@dataclass
class ThrowawayNessie(Throwaway):
    """A private Nessie server on S3; use as a context manager or call start/stop.

    Args:
        storage: the SeaweedFS whose S3 holds the warehouse; ``None``: one of its own, started
            and stopped with the server.
        base_dir: where to create the server's directory (a new temporary one by default).
        start_timeout: seconds to wait for the catalog to answer.
        heap: the JVM's maximum heap (``-Xmx``).
    """

    storage: ThrowawaySeaweed | None = None
    base_dir: Path | None = None
    start_timeout: float = 120.0
    heap: str = "512m"
    warehouse: str = "warehouse"
    bucket: str = "nessie"
    port: int = 0
    management_port: int = 0
    root: Path = field(init=False)
    java: Path = field(init=False)
    jar: Path = field(init=False)

    def __post_init__(self) -> None:
        self.java = find_java(MIN_JAVA, os.environ.get(JAVA_HOME_ENV))
        self.jar = jars(NESSIE)[-1]
        self.root = Path(tempfile.mkdtemp(prefix="streambed-nessie-", dir=self.base_dir))
        self._owns_storage = self.storage is None
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def uri(self) -> str:
        """The server's URI: Nessie's API is under ``/api/v2``, the Iceberg REST catalog under ``/iceberg``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def s3(self) -> ThrowawaySeaweed:
        """The SeaweedFS that holds the warehouse.

        Raises:
            RuntimeError: the server has no storage yet (not started).
        """
        if self.storage is None:
            raise RuntimeError("Nessie has no storage: it was not started")
        return self.storage

    def catalog_uri(self, branch: str = "main") -> str:
        """The Iceberg REST catalog's URI on ``branch``."""
        return f"{self.uri}/iceberg" + ("" if branch == "main" else f"/{branch}")

    def catalog_properties(self, branch: str = "main") -> dict[str, str]:
        """pyiceberg ``RestCatalog`` properties for the catalog on ``branch``, with the two a
        Streambed REST catalog needs: ``streambed.ledger-uri`` (an SQLite file) and
        ``streambed.staging-uri`` (a directory), both of the branch, in the server's directory.

        Nessie needs no client authentication here. Its ``/v1/config`` tells the client the S3
        endpoint, path-style access and the region; the ``s3.*`` credentials are the client's own
        (pyiceberg's pyarrow FileIO does not use Nessie's S3 request signing, and readers other
        than pyiceberg read the same properties).
        """
        storage = self.s3
        branch_dir = self.root / "branches" / branch
        branch_dir.mkdir(parents=True, exist_ok=True)
        return {
            "type": "rest",
            "uri": self.catalog_uri(branch),
            "warehouse": self.warehouse,
            "s3.endpoint": storage.s3_endpoint,
            "s3.access-key-id": storage.access_key,
            "s3.secret-access-key": storage.secret_key,
            "s3.region": REGION,
            "streambed.ledger-uri": f"sqlite:///{branch_dir / 'ledger.db'}",
            "streambed.staging-uri": (branch_dir / "staging").as_uri(),
        }

    def create_branch(self, name: str) -> str:
        """Create the branch ``name`` (made valid by :func:`branch_name`) at ``main``'s head; returns its name.

        Raises:
            requests.HTTPError: Nessie refused (the branch exists, say).
        """
        name = branch_name(name)
        main = requests.get(f"{self.uri}/api/v2/trees/main", timeout=10)
        main.raise_for_status()
        created = requests.post(f"{self.uri}/api/v2/trees", params={"name": name, "type": "BRANCH"},
                                json=main.json()["reference"], timeout=10)
        created.raise_for_status()
        return name

    def history(self, branch: str) -> list[dict[str, Any]]:
        """The commits of ``branch``, newest first, each with its operations (Nessie's log entries).

        Raises:
            requests.HTTPError: Nessie refused (no such branch, say).
        """
        response = requests.get(f"{self.uri}/api/v2/trees/{branch}/history", params={"fetch": "ALL"}, timeout=10)
        response.raise_for_status()
        return list(response.json()["logEntries"])

    def assign_branch(self, branch: str, commit: str) -> None:
        """Move ``branch`` to ``commit``: Nessie's way to undo the commits after it (a table keeps
        only its current snapshot, so rolling a table back is not).

        Raises:
            requests.HTTPError: Nessie refused (the branch moved meanwhile, say).
        """
        head = requests.get(f"{self.uri}/api/v2/trees/{branch}", timeout=10)
        head.raise_for_status()
        response = requests.put(f"{self.uri}/api/v2/trees/{branch}@{head.json()['reference']['hash']}",
                                params={"type": "BRANCH"}, json={"type": "BRANCH", "name": branch, "hash": commit},
                                timeout=10)
        response.raise_for_status()

    def start(self) -> ThrowawayNessie:
        """Start the storage (when the server owns it) and the server; wait until the catalog answers; returns self."""
        if self._running():
            raise RuntimeError(f"Nessie is already running (pid {self._process.pid if self._process else '?'})")
        if not self.root.exists():
            raise RuntimeError(f"Nessie was stopped and its directory {self.root} removed")
        if self.storage is None:
            self.storage = ThrowawaySeaweed(base_dir=self.base_dir)  # stop() removes it, started or not
            self.storage.start()
        self._create_bucket()
        started = time.monotonic()
        log_path = self.root / "server.log"
        for attempt in range(1, PORT_ATTEMPTS + 1):
            chosen = self._choose_ports()
            logged = log_path.stat().st_size if log_path.exists() else 0
            self._write_config()
            with open(log_path, "ab") as log:
                self._process = subprocess.Popen(
                    self._command(), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                    env=self._environment(), cwd=self.root, start_new_session=True,
                )
            try:
                self._wait_until_ready()
                break
            except BaseException:
                self._terminate()
                taken = PORT_TAKEN in log_path.read_bytes()[logged:].decode("utf-8", errors="replace")
                if not (taken and chosen and attempt < PORT_ATTEMPTS):
                    raise
            logger.info("Nessie: a chosen port was taken meanwhile (attempt %d), choosing new ones", attempt)
            for name in chosen:
                setattr(self, name, 0)
        logger.info("Nessie started in %.1f s: catalog %s, warehouse s3://%s on %s (%s)", time.monotonic() - started,
                    self.catalog_uri(), self.bucket, self.s3.s3_endpoint, self.root)
        return self

    def stop(self) -> None:
        """Stop the server (SIGTERM to its process group, SIGKILL after 10 s), delete its directory,
        and stop the storage it owns."""
        self._terminate()
        shutil.rmtree(self.root, ignore_errors=True)
        if self._owns_storage and self.storage is not None:
            self.storage.stop()
            self.storage = None

    @property
    def pid(self) -> int:
        """The running server's process id (it leads its own process group).

        Raises:
            RuntimeError: the server is not running.
        """
        if not self._running():
            raise RuntimeError("Nessie is not running")
        assert self._process is not None
        return self._process.pid

    def server_log(self) -> str:
        """The server's output so far (for failure messages)."""
        path = self.root / "server.log"
        return path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""

    def _settings(self) -> dict[str, str]:
        """Nessie's settings (no secret among them)."""
        s3 = "nessie.catalog.service.s3.default-options"
        return {
            "quarkus.http.host": "127.0.0.1",
            "quarkus.http.port": str(self.port),
            "quarkus.management.host": "127.0.0.1",
            "quarkus.management.port": str(self.management_port),
            "nessie.version.store.type": "IN_MEMORY",
            "nessie.catalog.default-warehouse": self.warehouse,
            f"nessie.catalog.warehouses.{self.warehouse}.location": f"s3://{self.bucket}/",
            f"{s3}.endpoint": self.s3.s3_endpoint,
            f"{s3}.path-style-access": "true",
            f"{s3}.region": REGION,
            f"{s3}.access-key": f"urn:nessie-secret:quarkus:{S3_SECRET}",
        }

    def _write_config(self) -> None:
        config = self.root / "config"
        config.mkdir(exist_ok=True)
        lines = [f"{key}={value}\n" for key, value in self._settings().items()]
        (config / "application.properties").write_text("".join(lines), encoding="utf-8")

    def _environment(self) -> dict[str, str]:
        """The server's environment: this process's, plus the S3 secret."""
        secret = {"name": self.s3.access_key, "secret": self.s3.secret_key}
        return {**os.environ, S3_SECRET_ENV: json.dumps(secret)}

    def _command(self) -> list[str]:
        return [str(self.java), f"-Xmx{self.heap}", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                "--enable-native-access=ALL-UNNAMED", "-jar", str(self.jar)]

    def _create_bucket(self) -> None:
        from pyarrow import fs

        storage = self.s3
        s3 = fs.S3FileSystem(endpoint_override=storage.s3_endpoint, access_key=storage.access_key,
                             secret_key=storage.secret_key, region=REGION, scheme="http", allow_bucket_creation=True)
        s3.create_dir(self.bucket)

    def _choose_ports(self) -> list[str]:
        """Choose a free port for each port not set; returns the names of the attributes set."""
        chosen = []
        for name in ("port", "management_port"):
            while not getattr(self, name):
                port = free_port()
                if port not in (self.port, self.management_port):
                    setattr(self, name, port)
                    chosen.append(name)
        return chosen

    def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                code = self._process.returncode
                raise RuntimeError(f"Nessie exited with code {code} while starting:\n{self.server_log()[-3000:]}")
            try:
                response = requests.get(f"{self.catalog_uri()}/v1/config", params={"warehouse": self.warehouse},
                                        timeout=5)
                response.raise_for_status()
                return
            except requests.RequestException as error:  # not up yet
                last_error = error
            time.sleep(0.2)
        raise TimeoutError(f"Nessie did not answer within {self.start_timeout} s (last error: {last_error!r}):\n"
                           f"{self.server_log()[-3000:]}")

    def _running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def _terminate(self) -> None:
        """SIGTERM the process group, SIGKILL after 10 s."""
        if self._running():
            assert self._process is not None
            stop_process_group(self._process)

