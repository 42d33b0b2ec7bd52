"""Source checks, publication membership, slot health and bad watermarks, on a real server."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from airflow_provider_streambed.capture.run import capture_run
from airflow_provider_streambed.capture.run_records import CaptureSettings
from airflow_provider_streambed.capture.setup import ensure_source
from airflow_provider_streambed.capture.slot import advance_slot, check_slot, drop_slot
from airflow_provider_streambed.capture.watermark import current_flush_lsn, pin_watermark
from airflow_provider_streambed.exceptions import SlotError, SourceError, WatermarkError
from airflow_provider_streambed.ledger import Ledger
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.testing.postgres import ThrowawayCluster
from tests.integration.capture.conftest import make_group, publish

pytestmark = pytest.mark.slow
Conn = psycopg.Connection[Any]


def publication_tables(conn: Conn) -> set[str]:
    rows = conn.execute("SELECT tablename::text FROM pg_publication_tables WHERE pubname = 'streambed_g'")
    return {name for (name,) in rows}


def test_missing_table(source: Conn) -> None:
    with pytest.raises(SourceError, match=r"group 'g', member 'nope': source table 'public.nope' does not exist"):
        ensure_source(source, make_group("nope"))


def test_table_without_key_needs_append_only(source: Conn) -> None:
    source.execute("CREATE TABLE events (at timestamptz, body text)")
    with pytest.raises(SourceError, match=r"'public.events' has neither a primary key nor a usable replica identity"):
        ensure_source(source, make_group("events"))
    tables = ensure_source(source, make_group("events", append_only=("events",)))
    assert tables["events"].key_columns == ()
    source.execute("CREATE TABLE keyed (a int NOT NULL, b int NOT NULL, c text)")
    source.execute("CREATE UNIQUE INDEX keyed_ba ON keyed (b, a)")
    source.execute("ALTER TABLE keyed REPLICA IDENTITY USING INDEX keyed_ba")
    assert ensure_source(source, make_group("keyed"))["keyed"].key_columns == ("b", "a")


def test_tables_whose_changes_cannot_reach_the_mirror_are_refused_naming_the_fix(source: Conn) -> None:
    source.execute("CREATE UNLOGGED TABLE scratch (id int PRIMARY KEY, v text)")
    for group in (make_group("scratch"), make_group("scratch", append_only=("scratch",))):
        with pytest.raises(SourceError, match=r"member 'scratch': source table 'public.scratch' is UNLOGGED .*never "
                                              r"sees them .*ALTER TABLE public.scratch SET LOGGED"):
            ensure_source(source, group)
    assert publication_tables(source) == set(), "nothing was set up for a refused table"
    source.execute("ALTER TABLE scratch SET LOGGED")
    assert ensure_source(source, make_group("scratch"))["scratch"].key_columns == ("id",)

    source.execute("CREATE TABLE silent (id int PRIMARY KEY, v text)")
    source.execute("ALTER TABLE silent REPLICA IDENTITY NOTHING")
    with pytest.raises(SourceError, match=r"'public.silent' has REPLICA IDENTITY NOTHING: its updates and deletes "
                                          r"carry no key.*REPLICA IDENTITY DEFAULT .*append_only=True"):
        ensure_source(source, make_group("silent"))
    assert ensure_source(source, make_group("silent", append_only=("silent",)))["silent"].key_columns == ()


def test_a_deferrable_primary_key_needs_another_key_or_append_only(source: Conn) -> None:
    # UPDATE t SET id = id + 1 under a deferrable key logs each row's delete and new image in turn:
    # a key holds two rows for a moment, and a merge by key would lose rows
    source.execute("CREATE TABLE shifted (id int PRIMARY KEY DEFERRABLE INITIALLY DEFERRED, v text NOT NULL)")
    with pytest.raises(SourceError, match=r"'public.shifted' has a DEFERRABLE primary key: .*re-create it not "
                                          r"deferrable \(ALTER TABLE public.shifted DROP CONSTRAINT ..., ADD PRIMARY "
                                          r"KEY \(id\)\).*REPLICA IDENTITY USING INDEX.*append_only=True"):
        ensure_source(source, make_group("shifted"))
    assert ensure_source(source, make_group("shifted", append_only=("shifted",)))["shifted"].key_columns == ("id",)
    source.execute("CREATE UNIQUE INDEX shifted_v ON shifted (v)")
    source.execute("ALTER TABLE shifted REPLICA IDENTITY USING INDEX shifted_v")  # immediate: one row per key
    assert ensure_source(source, make_group("shifted"))["shifted"].key_columns == ("v",)
    source.execute("ALTER TABLE shifted DROP CONSTRAINT shifted_pkey, ADD PRIMARY KEY (id)")
    source.execute("ALTER TABLE shifted REPLICA IDENTITY DEFAULT")
    assert ensure_source(source, make_group("shifted"))["shifted"].key_columns == ("id",)


def test_role_without_replication(source: Conn, pg_dsn: str) -> None:
    source.execute("CREATE TABLE t (id int PRIMARY KEY)")
    source.execute("DO $$ BEGIN CREATE ROLE plain LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$")
    with psycopg.connect(pg_dsn.replace("user=streambed", "user=plain"), autocommit=True) as conn, pytest.raises(
        SourceError, match="role 'plain' lacks replication rights; grant them with ALTER ROLE plain REPLICATION"
    ):
        ensure_source(conn, make_group("t"))


def test_slots_exhausted(source: Conn) -> None:
    source.execute("CREATE TABLE t (id int PRIMARY KEY)")
    used, total = source.execute(
        "SELECT count(*), current_setting('max_replication_slots')::int FROM pg_replication_slots"
    ).fetchone() or (0, 0)
    fillers = [f"filler_{i}" for i in range(total - used)]
    for name in fillers:
        source.execute("SELECT pg_create_physical_replication_slot(%s)", (name,))
    try:
        with pytest.raises(SlotError, match=f"all {total} replication slots are in use"):
            ensure_source(source, make_group("t"))
    finally:
        for name in fillers:
            source.execute("SELECT pg_drop_replication_slot(%s)", (name,))


def test_wal_level_must_be_logical() -> None:
    with ThrowawayCluster(settings={"wal_level": "replica"}) as cluster, psycopg.connect(
        cluster.dsn(), autocommit=True
    ) as conn:
        conn.execute("CREATE TABLE t (id int PRIMARY KEY)")
        with pytest.raises(SourceError, match="wal_level='replica'; logical decoding needs wal_level=logical"):
            ensure_source(conn, make_group("t"))


def test_publication_follows_the_declaration(source: Conn) -> None:
    for name in ("a", "b"):
        source.execute(f"CREATE TABLE {name} (id int PRIMARY KEY)")
    ensure_source(source, make_group("a"))
    assert publication_tables(source) == {"a"}
    ensure_source(source, make_group("a", "b"))
    assert publication_tables(source) == {"a", "b"}
    ensure_source(source, make_group("b"))
    assert publication_tables(source) == {"b"}
    assert source.execute("SELECT two_phase FROM pg_replication_slots WHERE slot_name = 'streambed_g'").fetchone() == (
        False,
    )


def test_bad_explicit_watermarks(source: Conn, ledger: Ledger, warehouse: str) -> None:
    source.execute("CREATE TABLE t (id int PRIMARY KEY)")
    group = make_group("t")
    first = capture_run(source, group, ledger, "r1", warehouse)
    publish(source, ledger, group, first)
    below = first.watermark - 1
    with pytest.raises(WatermarkError, match=rf"explicit W={below} is below cut 1's W={first.watermark}"):
        capture_run(source, group, ledger, "r2", warehouse, CaptureSettings(explicit_watermark=below))
    beyond = current_flush_lsn(source) + 10_000_000
    with pytest.raises(WatermarkError, match=rf"explicit W={beyond} is beyond the source's flushed WAL"):
        capture_run(source, group, ledger, "r2", warehouse, CaptureSettings(explicit_watermark=beyond))
    source.execute("INSERT INTO t VALUES (1)")
    chosen = current_flush_lsn(source)
    pinned = capture_run(source, group, ledger, "r2", warehouse, CaptureSettings(explicit_watermark=chosen))
    assert pinned.watermark == chosen
    with pytest.raises(WatermarkError, match=rf"explicit W={chosen + 1} differs from the W={chosen} this run pinned"):
        pin_watermark(source, ledger, group, "r2", explicit_watermark=chosen + 1)


def test_wal_retention_warning_threshold(
    source: Conn, ledger: Ledger, warehouse: str, caplog: pytest.LogCaptureFixture
) -> None:
    source.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
    group = make_group("t")
    publish(source, ledger, group, capture_run(source, group, ledger, "r1", warehouse))
    source.execute("INSERT INTO t SELECT g, repeat('x', 200) FROM generate_series(1, 2000) g")  # ~0.5 MB of WAL

    def retention_warnings() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.name.endswith("capture.slot") and r.levelname == "WARNING"]

    with caplog.at_level("INFO", logger="airflow_provider_streambed.capture.slot"):
        capture_run(source, group, ledger, "r2", warehouse)
        assert retention_warnings() == [], caplog.records  # far below the default 1 GiB
        capture_run(source, group, ledger, "r3", warehouse, CaptureSettings(wal_retention_warn_bytes=100_000))
    warnings = retention_warnings()
    assert len(warnings) == 1 and "group=g: slot streambed_g retains" in warnings[0]


def test_slot_health_and_advance(source: Conn, ledger: Ledger, warehouse: str) -> None:
    source.execute("CREATE TABLE t (id int PRIMARY KEY)")
    group = make_group("t")
    first = capture_run(source, group, ledger, "r1", warehouse)
    publish(source, ledger, group, first)
    publish_again = check_slot(source, group).confirmed_flush
    advance_slot(source, group, first.watermark)
    advance_slot(source, group, Lsn(16))  # never backwards: a no-op
    assert check_slot(source, group).confirmed_flush == publish_again == first.watermark
    drop_slot(source, group)
    with pytest.raises(SlotError, match=r"slot 'streambed_g' does not exist; the changes since.*Param resync"):
        capture_run(source, group, ledger, "r2", warehouse)
