"""Partition maintenance reaches a partitioned table's mirror: the member is copied again.

Real PostgreSQL, the real capture step, the job on the ``local[2]`` session and ``publish_cut``.
PostgreSQL publishes no change through the partitioned table for a partition truncated,
detached, dropped, or attached with its rows; the capture sees the partitions changed since the
last cut and copies the member again in the next cut, while a writer changes the other
partitions and another mirror keeps merging.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from airflow_provider_streambed.capture import run as capture_run_module
from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.exceptions import SchemaChangeError, is_final
from airflow_provider_streambed.ledger.claims import settle_failure
from airflow_provider_streambed.member_declarations import Mirror
from airflow_provider_streambed.read import CutReader
from tests.integration.refresh.cuts import Cuts, cuts_of
from tests.integration.refresh.deletes import delete_files_with_images

pytestmark = pytest.mark.slow

GROUP = RefreshGroup("parts", "src", "cat", "ns", (Mirror("public.readings"), Mirror("public.sites")))
SCHEMA = """
CREATE TABLE readings (site int NOT NULL, at date NOT NULL, value int, PRIMARY KEY (site, at)) PARTITION BY RANGE (at);
CREATE TABLE readings_2024 PARTITION OF readings FOR VALUES FROM ('2024-01-01') TO ('2025-01-01');
CREATE TABLE readings_2025 PARTITION OF readings FOR VALUES FROM ('2025-01-01') TO ('2026-01-01');
CREATE TABLE readings_2026 PARTITION OF readings FOR VALUES FROM ('2026-01-01') TO ('2027-01-01');
INSERT INTO readings SELECT s, d::date, s * 10 FROM generate_series(1, 3) s,
    generate_series('2024-06-01'::date, '2026-06-01'::date, '3 months') d;
CREATE TABLE sites (id int PRIMARY KEY, name text);
INSERT INTO sites VALUES (1, 'north'), (2, 'south');
"""
MAINTENANCE = {
    "truncate": "TRUNCATE readings_2024",
    "detach": "ALTER TABLE readings DETACH PARTITION readings_2024",
    "drop": "DROP TABLE readings_2024",
    "attach": """CREATE TABLE readings_2027 (LIKE readings INCLUDING ALL);
                 INSERT INTO readings_2027 VALUES (1, '2027-03-01', 7), (2, '2027-04-01', 8);
                 ALTER TABLE readings ATTACH PARTITION readings_2027
                     FOR VALUES FROM ('2027-01-01') TO ('2028-01-01')""",
}


@pytest.fixture
def cuts(spark: SparkSession, tmp_path: Path, pg_dsn: str, sqlite_catalog_uri: str) -> Iterator[Cuts]:
    with cuts_of(spark, tmp_path, pg_dsn, sqlite_catalog_uri, GROUP, SCHEMA) as cuts:
        yield cuts


def rows(cuts: Cuts, cut_id: int, member: str) -> list[tuple[Any, ...]]:
    return sorted(tuple(row.values()) for row in CutReader(cuts.catalog, GROUP.name).get(cut_id).to_arrow(member)
                  .to_pylist())


def source(cuts: Cuts, table: str) -> list[tuple[Any, ...]]:
    return sorted(cuts.conn.execute(f"SELECT * FROM {table}").fetchall())


def test_a_partition_attached_to_a_table_that_had_none_is_copied(
    spark: SparkSession, tmp_path: Path, pg_dsn: str, sqlite_catalog_uri: str
) -> None:
    group = RefreshGroup("bare", "src", "cat", "ns", (Mirror("public.events"),))
    schema = "CREATE TABLE events (id int PRIMARY KEY, at date NOT NULL) PARTITION BY RANGE (id);"
    with cuts_of(spark, tmp_path, pg_dsn, sqlite_catalog_uri, group, schema) as bare:
        bare.publish("run1")
        bare.conn.execute("CREATE TABLE events_low (id int PRIMARY KEY, at date NOT NULL)")
        bare.conn.execute("INSERT INTO events_low VALUES (1, '2026-01-01'), (2, '2026-01-02')")
        bare.conn.execute("ALTER TABLE events ATTACH PARTITION events_low FOR VALUES FROM (0) TO (100)")
        second = bare.publish("run2")  # PostgreSQL publishes no change for the attached rows
        rows = CutReader(bare.catalog, group.name).get(second.cut_id).to_arrow("events").to_pylist()
        assert sorted(row["id"] for row in rows) == [1, 2]


@pytest.mark.parametrize("operation", list(MAINTENANCE))
def test_partition_maintenance_copies_the_member_again(cuts: Cuts, operation: str) -> None:
    cuts.publish("run1")
    cuts.conn.execute(MAINTENANCE[operation])
    cuts.conn.execute("UPDATE readings SET value = value + 1 WHERE at >= '2026-01-01'")  # a writer elsewhere
    cuts.conn.execute("INSERT INTO sites VALUES (3, 'east')")
    second = cuts.publish("run2")
    assert rows(cuts, second.cut_id, "readings") == source(cuts, "readings")
    assert rows(cuts, second.cut_id, "sites") == source(cuts, "sites")
    table = CutReader(cuts.catalog, GROUP.name).get(second.cut_id).table("readings")
    summary = table.snapshot_by_id(second.members["readings"].snapshot_id).summary
    assert summary.get("streambed.resync-reason", "").startswith("its partitions changed")
    cuts.conn.execute("DELETE FROM readings WHERE site = 3")  # the next ordinary run merges on the copy
    third = cuts.publish("run3")
    assert rows(cuts, third.cut_id, "readings") == source(cuts, "readings")
    summary = CutReader(cuts.catalog, GROUP.name).get(third.cut_id).table("readings").snapshot_by_id(
        third.members["readings"].snapshot_id).summary
    assert summary.get("streambed.resync-reason") is None


def test_a_partition_truncated_while_the_run_captures_fails_it_finally_and_the_next_run_copies_again(
    cuts: Cuts, monkeypatch: pytest.MonkeyPatch
) -> None:
    cuts.publish("run1")
    cuts.conn.execute("UPDATE readings SET value = 0 WHERE site = 1")
    pin = capture_run_module.pin_watermark

    def truncate_then_pin(*args: Any, **kwargs: Any) -> Any:
        cuts.conn.execute("TRUNCATE readings_2025")  # after the table was described, before W: in no change record
        return pin(*args, **kwargs)

    monkeypatch.setattr(capture_run_module, "pin_watermark", truncate_then_pin)
    with pytest.raises(SchemaChangeError, match=r"member 'readings': the partitions of source table public.readings "
                                                r"changed while the run captured it") as failed:
        cuts.publish("run2")
    assert is_final(failed.value)
    monkeypatch.undo()
    assert cuts.ledger.last_cut(GROUP.name).cut_id == 1
    assert settle_failure(cuts.ledger, GROUP.name, "run2", failed.value, will_retry=True)  # final: released
    third = cuts.publish("run3")
    assert rows(cuts, third.cut_id, "readings") == source(cuts, "readings")


def test_a_partitioned_full_tables_deletes_carry_rows_while_no_partitions_identity_changes(
    cuts: Cuts, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under REPLICA IDENTITY FULL on every partition, the merge writes the removed rows in the
    position deletes (the change feed reads them there); not for a run during which a
    partition's identity changed, nor for the run after it (its reading is not recorded)."""
    for table in ("readings", "readings_2024", "readings_2025", "readings_2026"):
        cuts.conn.execute(f"ALTER TABLE {table} REPLICA IDENTITY FULL")
    cuts.conn.execute("INSERT INTO readings SELECT s, d::date, s FROM generate_series(4, 100) s, "
                      "generate_series('2024-06-01'::date, '2026-06-01'::date, '3 months') d")  # no compaction
    reader = CutReader(cuts.catalog, GROUP.name)
    published = [cuts.publish("run1")]

    def update(site: int) -> list[tuple[Any, ...]]:
        old = sorted(cuts.conn.execute("SELECT * FROM readings WHERE site = %s", (site,)).fetchall())
        cuts.conn.execute("UPDATE readings SET value = value + 1 WHERE site = %s", (site,))  # every partition
        return old

    def publish(run_key: str, site: int) -> Counter[bool]:
        old = update(site)
        published.append(cuts.publish(run_key))
        later, earlier = reader.get(published[-1].cut_id), reader.get(published[-2].cut_id)
        assert rows(cuts, later.cut_id, "readings") == source(cuts, "readings")
        removed = later.changes_since(earlier)["readings"].removed
        assert sorted(tuple(row.values()) for row in removed.to_pylist()) == old
        return delete_files_with_images(later, "readings")

    assert publish("run2", 1) == Counter({True: 1})
    pin = capture_run_module.pin_watermark

    def change_an_identity_then_pin(*args: Any, **kwargs: Any) -> Any:
        cuts.conn.execute("ALTER TABLE readings_2025 REPLICA IDENTITY DEFAULT")  # after the description
        cuts.conn.execute("ALTER TABLE readings_2025 REPLICA IDENTITY FULL")
        return pin(*args, **kwargs)

    monkeypatch.setattr(capture_run_module, "pin_watermark", change_an_identity_then_pin)
    assert publish("run3", 2) == Counter({True: 1, False: 1})
    monkeypatch.undo()
    assert publish("run4", 3) == Counter({True: 1, False: 2})  # run 3 recorded no reading to compare with
    assert publish("run5", 1) == Counter({True: 2, False: 2})
