"""``Cut.changes_since`` on real PostgreSQL, the in-process refresh and a real catalog.

A differential test: a random workload over several cuts (inserts, updates, deletes, key changes,
rows inserted and deleted between two cuts, a keyless table with duplicates and NULLs, a carried
member, a compaction, an added and a renamed column in between). For every pair of cuts (A, B), A's rows
less ``removed`` plus ``added`` are B's rows as multisets, and ``removed`` and ``added`` share no row.
``accounts`` gets ``REPLICA IDENTITY FULL`` after its first change: later deletes carry the removed rows'
values (written by the in-process merge, and in run 5 by Spark's), which the feed reads instead of the
older data files, so ranges mix both kinds.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import logging
import random
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb
import psycopg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from airflow_provider_streambed import Mirror, RefreshGroup
from airflow_provider_streambed.cli import main
from airflow_provider_streambed.declarations import CutRetention
from airflow_provider_streambed.exceptions import ChangeFeedError, CutExpiredError
from airflow_provider_streambed.local import refresh_once
from airflow_provider_streambed.read import Cut, CutReader
from airflow_provider_streambed.read.feed import snapshots
from airflow_provider_streambed.refresh.mirrors.duckdb_merge import IN_PROCESS_MERGE_CONF
from tests.integration.refresh.deletes import delete_files_with_images
from tests.integration.refresh.workloads import SCHEMA, workload

pytestmark = pytest.mark.slow

GROUP = RefreshGroup("feed", "src", "cat", "feed", (Mirror("public.accounts", compact_deleted_ratio=0.01),
                                                     Mirror("public.events", compact_deleted_ratio=0.01)))
RENAMED = {"holder": "owner"}


def _bag(table: pa.Table, columns: list[str]) -> Counter[tuple[Any, ...]]:
    """The rows of ``table`` in ``columns`` (a column it lacks reads as NULL, ``holder`` as ``owner``,
    its name before the rename), as a multiset."""
    rows = table.to_pylist()
    return Counter(tuple(row[column] if column in row else row.get(RENAMED.get(column, column))
                         for column in columns) for row in rows)


def _rewrites(cuts: list[Cut], name: str) -> set[int]:
    """The cuts whose snapshot of member ``name`` rewrote it whole (deleted its earlier files)."""
    found = set()
    for earlier, later in itertools.pairwise(cuts):
        snapshot_id = later.members[name].snapshot_id
        snapshot = later.table(name).snapshot_by_id(snapshot_id)
        assert snapshot is not None and snapshot.summary is not None
        if snapshot_id != earlier.members[name].snapshot_id and snapshot.summary.get("deleted-data-files"):
            found.add(later.cut_id)
    return found


def _check_arrow_reads(cuts: list[Cut]) -> None:
    """``Cut.to_arrow`` (deletes applied by mask) gives pyiceberg's own scan, row for row and type for type."""
    for cut in cuts:
        for name in ("accounts", "events"):
            scanned = cut.table(name).scan(snapshot_id=cut.member(name).snapshot_id).to_arrow()
            assert cut.to_arrow(name).equals(scanned), f"cut {cut.cut_id}, {name}"


def test_changes_between_every_pair_of_cuts_rebuild_the_later_cut(pg_dsn: str, sqlite_catalog_uri: str,
                                                                   tmp_path: Path, spark: SparkSession,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    properties = {"uri": sqlite_catalog_uri, "warehouse": (tmp_path / "warehouse").as_uri()}
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(SCHEMA)
    rng = random.Random(34)
    reader = CutReader(properties, GROUP)
    cuts: list[Cut] = []
    for run in range(7):
        if run == 2:
            with psycopg.connect(pg_dsn, autocommit=True) as conn:
                conn.execute("ALTER TABLE accounts REPLICA IDENTITY FULL")
        if run:
            workload(pg_dsn, rng, run)
        spark_conf = {IN_PROCESS_MERGE_CONF: "false"} if run == 5 else {}  # run 5's deletes are written by Spark
        result = refresh_once(GROUP, source_dsn=pg_dsn, catalog_properties=properties, run_key=f"r{run}",
                              compact="all" if run == 3 else "none", spark_conf=spark_conf)
        assert result.cut is not None
        cuts.append(reader.get(result.cut.cut_id))
    _check_arrow_reads(cuts)
    assert delete_files_with_images(cuts[2], "accounts") == Counter({False: 1, True: 1})
    # after the compaction (run 3): run 4 added a column (its deletes carry no rows), run 5 (Spark's merge) did not
    assert delete_files_with_images(cuts[5], "accounts") == Counter({False: 1, True: 1})
    with caplog.at_level(logging.DEBUG, logger=snapshots.__name__):  # run 2's removed rows: from its deletes alone
        cuts[2].changes_since(cuts[1])
    assert "rows read from 0 data files and 1 delete files' rows" in caplog.text
    methods: Counter[tuple[str, str]] = Counter()
    for i, earlier in enumerate(cuts):
        for later in cuts[i:]:
            changes = later.changes_since(earlier)
            assert set(changes) == {"accounts", "events"}
            for name, change in changes.items():
                methods[(name, change.method)] += 1
                assert (change.since, change.until) == (earlier.watermark, later.watermark)
                columns = later.schema(name).names
                assert change.removed.schema.names == change.added.schema.names == columns
                removed, added = _bag(change.removed, columns), _bag(change.added, columns)
                assert not removed & added, f"{name} {earlier.cut_id}->{later.cut_id}: not net"
                before = _bag(earlier.to_arrow(name), columns)
                assert removed <= before, f"{name} {earlier.cut_id}->{later.cut_id}: removed rows A lacks"
                assert before - removed + added == _bag(later.to_arrow(name), columns), \
                    f"{name} {earlier.cut_id}->{later.cut_id} ({change.method}: {change.reason})"
                if earlier.members[name].snapshot_id == later.members[name].snapshot_id:
                    assert change.removed.num_rows == change.added.num_rows == 0
    # the pairs across a whole rewrite (the compaction, the added column, the rename's copy) are diffed whole
    for name in ("accounts", "events"):
        rewrites = _rewrites(cuts, name)
        assert rewrites, f"{name}: the workload rewrote nothing whole"
        across = sum(1 for a in cuts for b in cuts if any(a.cut_id < k <= b.cut_id for k in rewrites))
        assert (methods[(name, "full diff")], methods[(name, "snapshots")]) == (across, 28 - across)
    change = cuts[2].changes_since(cuts[1])["accounts"]
    assert change.method == "snapshots" and change.reason == "" and change.added.num_rows > 0
    removed_relation, added_relation = change.to_duckdb(duckdb.connect())
    assert removed_relation.columns == change.removed.schema.names
    assert removed_relation.to_arrow_table().num_rows == change.removed.num_rows
    assert added_relation.aggregate("count(*)").fetchone() == (change.added.num_rows,)
    removed_frame, added_frame = change.to_spark(spark)
    assert (removed_frame.count(), added_frame.count()) == (change.removed.num_rows, change.added.num_rows)
    assert removed_frame.columns == change.removed.schema.names
    assert "rewrote the member whole" in cuts[5].changes_since(cuts[1])["accounts"].reason
    renamed = cuts[6].changes_since(cuts[5])["accounts"]  # across the rename: only what changed
    assert "holder" in renamed.added.schema.names and renamed.removed.num_rows < cuts[5].to_arrow("accounts").num_rows

    # the CLI: counts per member, and the changes as Parquet
    base = ["--catalog-uri", sqlite_catalog_uri, "--warehouse", properties["warehouse"], "--group", "feed"]
    out = tmp_path / "diff"
    assert main(["cuts", "diff", *base, "2", "3", "--json", "--output", str(out)]) == 0
    expected = cuts[2].changes_since(cuts[1])
    for name, change in expected.items():  # rows in no particular order
        columns = change.added.schema.names
        assert _bag(pq.read_table(out / name / "added.parquet"), columns) == _bag(change.added, columns)
        assert _bag(pq.read_table(out / name / "removed.parquet"), columns) == _bag(change.removed, columns)
    with pytest.raises(ChangeFeedError, match="must be the earlier cut"):
        cuts[1].changes_since(cuts[2])


def test_an_expired_cut_says_when_it_expired(pg_dsn: str, sqlite_catalog_uri: str, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    properties = {"uri": sqlite_catalog_uri, "warehouse": (tmp_path / "warehouse").as_uri()}
    group = RefreshGroup("short", "src", "cat", "short", (Mirror("public.accounts"),),
                         retention=CutRetention(keep_last=2, keep_newer_than=dt.timedelta(0),
                                                 delete_files_after=dt.timedelta(0)))
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(SCHEMA)
    reader = CutReader(properties, group)
    cuts = []
    for run in range(3):
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute("UPDATE accounts SET balance = balance + 1 WHERE id = %s", (run + 1,))
        refresh_once(group, source_dsn=pg_dsn, catalog_properties=properties, run_key=f"r{run}")
        cuts.append(reader.latest())
    assert [cut.cut_id for cut in reader.list()] == [2, 3]
    with pytest.raises(CutExpiredError, match=r"cut 1 \(W=.*\), which expired at 20"):
        cuts[2].changes_since(cuts[0])
    base = ["--catalog-uri", sqlite_catalog_uri, "--warehouse", properties["warehouse"], "--group", "short"]
    assert main(["cuts", "diff", *base, "1", "3"]) == 2
    assert "which expired at" in capsys.readouterr().out
    assert main(["cuts", "diff", *base, "2", "3"]) == 0
    printed = capsys.readouterr().out
    assert "accounts" in printed and "snapshots" in printed
    assert main(["cuts", "diff", *base, "2", "3", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["members"][0]["added"] == 1
