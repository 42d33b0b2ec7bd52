"""A publish whose catalog connection drops around COMMIT: the retry settles it from the ledger.

The catalog database (PostgreSQL) is reached through a TCP proxy this test controls. Inside the
publish transaction (``before_commit``) the proxy is armed; it then cuts the connection on the
next ``COMMIT`` the client sends: after passing it on (the commit happens, the client never
hears of it) or before (nothing commits). When the commit happened, the publish finds its cut in
the ledger and returns it; when not, the task sees the connection error. Either way its retry,
with the same run key, ends with exactly one cut.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from pyiceberg.catalog.sql import SqlCatalog
from sqlalchemy import Connection
from sqlalchemy.exc import OperationalError

from airflow_provider_streambed.catalog import open_catalog
from airflow_provider_streambed.ledger import Ledger
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.publish import publish_cut
from airflow_provider_streambed.read import CutReader
from airflow_provider_streambed.testing.postgres import ThrowawayCluster, free_port
from tests.integration.publish.helpers import bank_tables, make_group, pin_and_stage

pytestmark = pytest.mark.slow

COMMIT = b"Q\x00\x00\x00\x0bCOMMIT\x00"  # a simple-protocol Query message: what psycopg sends for commit()


class CommitCutter:
    """A TCP proxy to PostgreSQL that, once armed, cuts the connection that sends ``COMMIT``."""

    def __init__(self, target_port: int, deliver: bool) -> None:
        self.target_port, self.deliver = target_port, deliver
        self.port = free_port()
        self.armed = threading.Event()
        self.cut = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", self.port))
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:  # closed
                return
            server = socket.create_connection(("127.0.0.1", self.target_port))
            muted = threading.Event()  # this connection's answers are dropped from the cut on
            threading.Thread(target=self._pump, args=(client, server, True, muted), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, False, muted), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, upstream: bool, muted: threading.Event) -> None:
        try:
            while data := source.recv(65536):
                if upstream and self.armed.is_set() and COMMIT in data:
                    self.armed.clear()
                    muted.set()
                    self.cut.set()
                    if self.deliver:
                        sink.sendall(data)
                        time.sleep(0.5)  # the server commits; its answer is never passed back
                    _hang_up(source, sink)
                    return
                if muted.is_set():
                    continue
                sink.sendall(data)
        except OSError:  # the other pump closed the pair
            pass
        finally:
            _hang_up(source, sink)

    def close(self) -> None:
        self._listener.close()


def _hang_up(*ends: socket.socket) -> None:
    """Close both sides at once: ``shutdown`` sends FIN and wakes the other pump's ``recv`` (a bare
    ``close`` would leave the server's backend holding its transaction's locks)."""
    for end in ends:
        with contextlib.suppress(OSError):
            end.shutdown(socket.SHUT_RDWR)
        end.close()


@pytest.fixture
def catalog_database(pg_cluster: ThrowawayCluster) -> Iterator[str]:
    name = pg_cluster.create_database()
    yield name
    pg_cluster.drop_database(name)


@pytest.mark.parametrize("delivered", [True, False], ids=["commit-delivered", "commit-lost"])
def test_the_retry_of_a_publish_cut_off_at_commit_publishes_exactly_once(
    pg_cluster: ThrowawayCluster, catalog_database: str, tmp_path: Any, delivered: bool
) -> None:
    proxy = CommitCutter(pg_cluster.port, deliver=delivered)
    direct = f"postgresql+psycopg://streambed@127.0.0.1:{pg_cluster.port}/{catalog_database}"
    proxied = {"uri": f"postgresql+psycopg://streambed@127.0.0.1:{proxy.port}/{catalog_database}",
               "warehouse": (tmp_path / "warehouse").as_uri()}
    try:
        catalog = open_catalog(proxied)
        assert isinstance(catalog, SqlCatalog)
        ledger = Ledger(catalog.engine)
        ledger.create()
        group, warehouse = make_group(), proxied["warehouse"]
        publish_cut(catalog, ledger, group, "run1", pin_and_stage(ledger, warehouse, "bank", "run1", Lsn(1000),
                                                                  bank_tables(1)))
        manifests = pin_and_stage(ledger, warehouse, "bank", "run2", Lsn(2000), bank_tables(2))

        def arm(_: Connection) -> None:
            proxy.armed.set()

        if delivered:  # the commit's answer is lost, but the ledger holds its outcome: the publish settles on it
            first = publish_cut(catalog, ledger, group, "run2", manifests, before_commit=arm)
            assert first.cut_id == 2
        else:
            with pytest.raises(OperationalError):
                publish_cut(catalog, ledger, group, "run2", manifests, before_commit=arm)
        assert proxy.cut.is_set()
        outcome = Ledger(direct).cut_for_run("bank", "run2")  # what really happened, read past the proxy
        assert (outcome is not None) == delivered

        retried = publish_cut(open_catalog(proxied), Ledger(catalog.engine), group, "run2", manifests)
        assert retried.cut_id == 2
        assert [cut.cut_id for cut in Ledger(direct).list_cuts("bank")] == [1, 2]
        if outcome is not None:
            assert retried.members == outcome.members  # settled from the ledger, not published again
        for table in ("accounts", "totals"):
            assert len(catalog.load_table(("ns", table)).snapshots()) == 2
        cut = CutReader(open_catalog(proxied), "bank").latest()
        assert cut.verify() == []
        assert set(cut.to_arrow("accounts").column("version").to_pylist()) == {2}
    finally:
        proxy.close()
