"""Compaction on real PostgreSQL, spark-submit and catalog: due at the threshold, same rows, no deletes
left; a failed compaction leaves the run retryable and publishes nothing."""

from __future__ import annotations

import logging
from pathlib import Path

import psycopg
import pytest

from airflow_provider_streambed import Mirror, RefreshGroup
from airflow_provider_streambed.catalog import open_catalog
from airflow_provider_streambed.exceptions import RefreshError
from airflow_provider_streambed.ledger import RunState
from airflow_provider_streambed.local import refresh_once
from airflow_provider_streambed.read import Cut, CutReader
from airflow_provider_streambed.read.snapshot_files import plan_snapshot_files
from airflow_provider_streambed.testing.spark import EventLogs

pytestmark = pytest.mark.slow

GROUP = RefreshGroup("compacting", "src", "cat", "compacting", (Mirror("public.items", compact_deleted_ratio=0.1),))


def _update(dsn: str, ids: range) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("UPDATE items SET v = v + 1 WHERE id = ANY(%s)", (list(ids),))


def _storage(cut: Cut) -> tuple[int, int, str]:
    """The cut's data files, delete files, and the operation of its items snapshot."""
    table = cut.table("items")
    files = plan_snapshot_files(table, cut.member("items").snapshot_id)
    snapshot = table.snapshot_by_id(cut.member("items").snapshot_id)
    assert snapshot is not None and snapshot.summary is not None
    return len(files.data), len(files.deletes), snapshot.summary.operation.value


def _rows(dsn: str) -> list[tuple[int, int]]:
    with psycopg.connect(dsn) as conn:
        return sorted(conn.execute("SELECT id, v FROM items").fetchall())


def test_compaction_at_the_threshold_and_after_a_failed_try(pg_dsn: str, sqlite_catalog_uri: str,
                                                           tmp_path: Path) -> None:
    properties = {"uri": sqlite_catalog_uri, "warehouse": (tmp_path / "warehouse").as_uri()}
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE items (id bigint PRIMARY KEY, v int)")
        conn.execute("INSERT INTO items SELECT g, 0 FROM generate_series(1, 100) g")
    reader = CutReader(properties, GROUP)

    def run(key: str) -> Cut:
        result = refresh_once(GROUP, source_dsn=pg_dsn, catalog_properties=properties, run_key=key)
        assert result.cut is not None
        cut = reader.get(result.cut.cut_id)
        assert sorted((row["id"], row["v"]) for row in cut.to_arrow("items").to_pylist()) == _rows(pg_dsn)
        return cut

    first = run("r1")
    _update(pg_dsn, range(1, 7))
    second = run("r2")  # 6 of 100 rows deleted: below 10 %
    _update(pg_dsn, range(50, 56))
    third = run("r3")  # the plan saw 6 %: still merge-on-read, now 12 %
    assert [_storage(cut)[1:] for cut in (first, second, third)] == [(0, "append"), (1, "overwrite"),
                                                                     (2, "overwrite")]
    data_files = _storage(third)[0]

    _update(pg_dsn, range(90, 91))
    deletes = plan_snapshot_files(third.table("items"), third.member("items").snapshot_id).deletes
    hidden = Path(deletes[0].removeprefix("file://"))
    hidden.rename(hidden.with_suffix(".hidden"))  # the compaction reads every live row: it fails
    with pytest.raises(RefreshError):
        refresh_once(GROUP, source_dsn=pg_dsn, catalog_properties=properties, run_key="r4")
    ledger = reader.ledger
    run_state = ledger.get_run(GROUP.name, "r4")
    assert run_state is not None and run_state.state == RunState.PINNED  # retryable, with its W
    assert reader.latest().cut_id == third.cut_id  # nothing published

    hidden.with_suffix(".hidden").rename(hidden)
    fourth = run("r4")  # the retry compacts: same rows, no delete file, fewer files
    assert fourth.watermark == run_state.watermark
    data, delete_files, operation = _storage(fourth)
    assert (delete_files, operation) == (0, "overwrite") and data < data_files
    assert fourth.row_counts() == {"items": 100}

    catalog = open_catalog(properties)
    history = catalog.load_table(("compacting", "items")).snapshot_by_id(third.member("items").snapshot_id)
    assert history is not None  # the earlier cut stays readable
    assert len(third.to_arrow("items")) == 100


def test_a_small_hot_table_is_compacted_in_process_without_spark(pg_dsn: str, sqlite_catalog_uri: str,
                                                                 tmp_path: Path,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    properties = {"uri": sqlite_catalog_uri, "warehouse": (tmp_path / "warehouse").as_uri()}
    events = EventLogs(tmp_path / "events")
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE items (id bigint PRIMARY KEY, v int)")
        conn.execute("INSERT INTO items SELECT g, 0 FROM generate_series(1, 20) g")
    reader = CutReader(properties, GROUP)
    caplog.set_level(logging.INFO, logger="airflow_provider_streambed.refresh")
    operations = []
    for run in range(1, 6):
        _update(pg_dsn, range(run, run + 2))  # 2 of 20 rows a run: due for compaction at once (10 %)
        result = refresh_once(GROUP, source_dsn=pg_dsn, catalog_properties=properties, spark_conf=events.conf())
        cut = reader.get(result.cut.cut_id)
        assert sorted((row["id"], row["v"]) for row in cut.to_arrow("items").to_pylist()) == _rows(pg_dsn)
        operations.append(_storage(cut)[1:])
    assert events.applications() == 0, "a small mirror's compaction started Spark"
    assert "rewritten whole in-process (compaction: " in caplog.text
    assert (0, "overwrite") in operations[1:] and (1, "overwrite") in operations  # compacted, then merged on read
