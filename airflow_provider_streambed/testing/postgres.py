"""A throwaway PostgreSQL cluster with logical decoding, for tests, benchmarks and the demo.

It runs the Debian server binaries (``initdb``, ``pg_ctl``) in a temporary directory, listens on
a free port on 127.0.0.1 only, and is removed on :meth:`ThrowawayCluster.stop`. PostgreSQL
refuses to run as root, so under root the cluster runs as the unprivileged user ``nobody``.
Authentication is ``trust`` on loopback: the DSN carries no password; a role made by
:meth:`ThrowawayCluster.add_password_role` must give its password.
"""

from __future__ import annotations

import glob
import logging
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from airflow_provider_streambed.testing.throwaway import Throwaway

logger = logging.getLogger(__name__)

SUPERUSER = "streambed"
MIN_VERSION = 14
SETTINGS = {
    "listen_addresses": "'127.0.0.1'",
    "wal_level": "logical",
    "max_replication_slots": "20",
    "max_wal_senders": "20",
    "max_prepared_transactions": "20",
    "track_commit_timestamp": "on",
    "fsync": "off",
    "full_page_writes": "off",
    "max_connections": "100",
    "shared_buffers": "128MB",
    "log_min_messages": "warning",
}


def find_bin_dir() -> Path:
    """The directory of the newest PostgreSQL (>= 14) server binaries.

    ``STREAMBED_PG_BINDIR`` overrides the search of ``/usr/lib/postgresql/*/bin`` and ``PATH``.

    Raises:
        FileNotFoundError: no server binaries; ``make install`` installs Debian's ``postgresql``.
    """
    override = os.environ.get("STREAMBED_PG_BINDIR")
    candidates = [Path(override)] if override else []
    debian = {Path(path).parent: Path(path).parts[-3] for path in glob.glob("/usr/lib/postgresql/*/bin/initdb")}
    versions = {bin_dir: int(version) for bin_dir, version in debian.items() if version.isdigit()}
    candidates += sorted((d for d, v in versions.items() if v >= MIN_VERSION), key=versions.__getitem__, reverse=True)
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(Path(on_path).resolve().parent)
    for candidate in candidates:
        if (candidate / "initdb").exists() and (candidate / "pg_ctl").exists():
            return candidate
    raise FileNotFoundError(
        "PostgreSQL server binaries (initdb, pg_ctl) not found in /usr/lib/postgresql/*/bin or PATH; "
        "run 'make install' (Debian package 'postgresql') or set STREAMBED_PG_BINDIR"
    )


def free_port() -> int:
    """A TCP port on localhost that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class ThrowawayCluster(Throwaway):
    """A private PostgreSQL cluster; use as a context manager or call start/stop.

    Args:
        base_dir: where to create the cluster's directory (a new temporary one by default).
        settings: extra ``postgresql.conf`` settings, merged over :data:`SETTINGS`.
    """

    base_dir: Path | None = None
    settings: dict[str, str] = field(default_factory=dict)
    port: int = 0
    root: Path = field(init=False)
    bin_dir: Path = field(init=False)

    def __post_init__(self) -> None:
        self.bin_dir = find_bin_dir()
        self.root = Path(tempfile.mkdtemp(prefix="streambed-pg-", dir=self.base_dir))
        self._os_user = "nobody" if os.geteuid() == 0 else None

    @property
    def data_dir(self) -> Path:
        """The cluster's data directory."""
        return self.root / "data"

    def dsn(self, dbname: str = "postgres") -> str:
        """A libpq DSN for ``dbname`` on this cluster (no password: trust on loopback)."""
        return f"host=127.0.0.1 port={self.port} user={SUPERUSER} dbname={dbname}"

    def start(self) -> ThrowawayCluster:
        """Create and start the cluster; returns self."""
        if self._os_user:
            shutil.chown(self.root, user=self._os_user)
        os.chmod(self.root, 0o700)
        self._run("initdb", "-D", str(self.data_dir), "-U", SUPERUSER, "--auth=trust", "-E", "UTF8",
                  "--locale=C", "--no-sync")
        self.port = self.port or free_port()
        settings = {**SETTINGS, **self.settings, "port": str(self.port),
                    "unix_socket_directories": f"'{self.root}'"}
        with open(self.data_dir / "postgresql.conf", "a", encoding="utf-8") as conf:
            conf.writelines(f"{name} = {value}\n" for name, value in settings.items())
        self._run("pg_ctl", "-D", str(self.data_dir), "-l", str(self.root / "server.log"), "-w", "-t", "60", "start")
        logger.info("PostgreSQL cluster started at 127.0.0.1:%s (%s)", self.port, self.root)
        return self

    def restart(self) -> None:
        """Restart the server (fast shutdown), keeping its data and port."""
        self._run("pg_ctl", "-D", str(self.data_dir), "-l", str(self.root / "server.log"), "-w", "-m", "fast",
                  "restart")

    def pause(self) -> None:
        """Stop the server (fast shutdown), keeping its data and port: the database is down until :meth:`resume`."""
        self._run("pg_ctl", "-D", str(self.data_dir), "-w", "-m", "fast", "stop")

    def resume(self) -> None:
        """Start the server stopped by :meth:`pause`."""
        self._run("pg_ctl", "-D", str(self.data_dir), "-l", str(self.root / "server.log"), "-w", "-t", "60", "start")

    def stop(self) -> None:
        """Stop the server and delete the cluster's directory."""
        if (self.data_dir / "postmaster.pid").exists():
            self._run("pg_ctl", "-D", str(self.data_dir), "-w", "-m", "immediate", "stop")
        shutil.rmtree(self.root, ignore_errors=True)

    def create_database(self, name: str | None = None) -> str:
        """Create a fresh database and return its name."""
        import psycopg

        name = name or f"db_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return name

    def add_password_role(self, role: str, password: str) -> None:
        """Create a superuser ``role`` that, unlike the trusted superuser, must log in with
        ``password`` (SCRAM, over TCP: a ``pg_hba.conf`` line ahead of the trust lines)."""
        import psycopg
        from psycopg import sql

        hba = self.data_dir / "pg_hba.conf"
        hba.write_text(f"host all {role} 127.0.0.1/32 scram-sha-256\n{hba.read_text()}")
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE ROLE {} LOGIN SUPERUSER PASSWORD {}").format(
                sql.Identifier(role), sql.Literal(password)))
            conn.execute("SELECT pg_reload_conf()")

    def drop_database(self, name: str) -> None:
        """Drop a database with its replication slots and open sessions."""
        import psycopg

        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(
                "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                "WHERE database = %s AND NOT active",
                (name,),
            )
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def server_log(self) -> str:
        """The server's log so far (for failure messages)."""
        path = self.root / "server.log"
        return path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""

    def _run(self, program: str, *args: str) -> None:
        command = [str(self.bin_dir / program), *args]
        result = subprocess.run(command, user=self._os_user, capture_output=True, text=True, cwd=self.root,
                                check=False)
        if result.returncode != 0:
            raise RuntimeError(
                f"{program} failed with exit code {result.returncode}:\n{result.stdout}{result.stderr}\n"
                f"{self.server_log()[-3000:]}"
            )



def wait_for_quiet_wal(
    dsn: str, quiet_seconds: float = 5.0, settle_seconds: float = 40.0, timeout_seconds: float = 120.0
) -> str:
    """Checkpoint, let the server write its last record, then wait until the WAL stays put.

    After writes stop, the server still writes WAL of its own: a checkpoint when one is due, and
    one running-transactions record by the background writer up to about 25 s after the last
    "important" record (15 s interval, longer while it hibernates). ``CHECKPOINT`` takes the due
    checkpoint now; then this waits (up to ``settle_seconds``) for the background writer's record,
    and finally for ``quiet_seconds`` without any WAL. Returns the position: what a quiet source
    looks like to a run, whose W then equals the last cut's W.

    Raises:
        TimeoutError: the position kept moving for ``timeout_seconds`` (something writes).
    """
    import psycopg

    deadline = time.monotonic() + timeout_seconds
    with psycopg.connect(dsn, autocommit=True) as conn:

        def position() -> str:
            row = conn.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()
            assert row is not None
            return str(row[0])

        conn.execute("CHECKPOINT")
        checkpointed, settle_until = position(), time.monotonic() + settle_seconds
        while position() == checkpointed and time.monotonic() < settle_until:
            time.sleep(0.25)
        last, since = position(), time.monotonic()
        while time.monotonic() - since < quiet_seconds:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the WAL position kept moving for {timeout_seconds} s (now {last})")
            time.sleep(0.25)
            if (now := position()) != last:
                last, since = now, time.monotonic()
        return last
