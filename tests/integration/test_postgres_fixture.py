"""The throwaway cluster is real, private and configured for logical decoding."""

from __future__ import annotations

import psycopg
import pytest

from airflow_provider_streambed.lsn import Lsn, register_lsn_adapters
from airflow_provider_streambed.testing.postgres import ThrowawayCluster

pytestmark = pytest.mark.slow


def test_cluster_settings(pg_dsn: str) -> None:
    with psycopg.connect(pg_dsn) as conn:
        settings = dict(conn.execute(
            "SELECT name, setting FROM pg_settings WHERE name IN "
            "('wal_level', 'max_replication_slots', 'max_wal_senders', 'max_prepared_transactions', "
            "'listen_addresses')"
        ).fetchall())
    assert settings["wal_level"] == "logical"
    assert int(settings["max_replication_slots"]) >= 10
    assert int(settings["max_wal_senders"]) >= 10
    assert int(settings["max_prepared_transactions"]) >= 10
    assert settings["listen_addresses"] == "127.0.0.1"


def test_prepared_transaction_commits(pg_dsn: str) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE t (id int PRIMARY KEY)")
        conn.execute("BEGIN")
        conn.execute("INSERT INTO t VALUES (1)")
        conn.execute("PREPARE TRANSACTION 'streambed_test'")
        assert conn.execute("SELECT gid FROM pg_prepared_xacts").fetchall() == [("streambed_test",)]
        assert conn.execute("SELECT count(*) FROM t").fetchone() == (0,)
        conn.execute("COMMIT PREPARED 'streambed_test'")
        assert conn.execute("SELECT count(*) FROM t").fetchone() == (1,)


def test_each_test_gets_a_fresh_database(pg_dsn: str) -> None:
    with psycopg.connect(pg_dsn) as conn:
        tables = conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").fetchone()
    assert tables == (0,)


@pytest.mark.parametrize("binary", [False, True])
def test_pg_lsn_round_trips_through_psycopg(pg_dsn: str, binary: bool) -> None:
    with psycopg.connect(pg_dsn) as conn:
        register_lsn_adapters(conn)
        cursor = conn.cursor(binary=binary)
        current = cursor.execute("SELECT pg_current_wal_insert_lsn()").fetchone()[0]
        assert isinstance(current, Lsn)
        echoed = cursor.execute("SELECT %s::pg_lsn, %s::pg_lsn + 16", (current, Lsn.parse("16/B374D848"))).fetchone()
        assert echoed == (current, Lsn.parse("16/B374D858"))


def test_a_second_cluster_is_independent_and_removed(tmp_path_factory: pytest.TempPathFactory) -> None:
    with ThrowawayCluster() as cluster:
        root = cluster.root
        with psycopg.connect(cluster.dsn()) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
    assert not root.exists()
