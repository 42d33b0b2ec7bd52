"""Keyless tables (``REPLICA IDENTITY FULL`` without a primary key) are mirrored as multisets.

Real PostgreSQL, the real capture step, the job on the ``local[2]`` session (the in-process merge,
or Spark's when it is switched off) and ``publish_cut``: after every run of a random workload of
exact duplicates, updates onto other rows' values, swaps, deletes of one of several identical
rows, bulk ``INSERT ... SELECT`` of existing rows, NULLs in every column and TOASTed values, the
published mirror equals the source table as a multiset.
"""

from __future__ import annotations

import logging
import random
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import psycopg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.exceptions import FinalRefreshError, is_final
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.member_declarations import Mirror
from airflow_provider_streambed.read import CutReader
from airflow_provider_streambed.refresh.mirrors import merge_lookups
from airflow_provider_streambed.refresh.mirrors.duckdb_merge import IN_PROCESS_MERGE_CONF, merge_in_process
from airflow_provider_streambed.refresh.mirrors.keyless_probe import probe_column
from airflow_provider_streambed.refresh.mirrors.merge_input import MirrorInput
from airflow_provider_streambed.refresh.mirrors.position_delete_rows import DELETE_SCHEMA
from airflow_provider_streambed.refresh.spark.job import run_job
from airflow_provider_streambed.staging import SnapshotFiles, TableCapture
from tests.integration.refresh.changelog_model import TableModel
from tests.integration.refresh.cuts import Cuts, cuts_of
from tests.integration.refresh.jobs import advance, read_files, stage_spec

pytestmark = pytest.mark.slow

GROUP = RefreshGroup("links", "src", "cat", "ns", (Mirror("public.links"),))
COLUMNS = "src, dst, label, doc"
SCHEMA = """
CREATE TABLE links (src int, dst int, label text, doc text);
ALTER TABLE links REPLICA IDENTITY FULL;
INSERT INTO links SELECT g % 4, g % 3, 'l' || (g % 2), NULL FROM generate_series(1, 12) g;
INSERT INTO links VALUES (NULL, NULL, NULL, NULL), (NULL, NULL, NULL, NULL), (1, NULL, 'x', NULL);
"""


@pytest.fixture(params=["true", "false"], ids=["in-process", "spark"])
def cuts(request: pytest.FixtureRequest, spark: SparkSession, tmp_path: Path, pg_dsn: str,
         sqlite_catalog_uri: str) -> Iterator[Cuts]:
    spark.conf.set(IN_PROCESS_MERGE_CONF, request.param)
    try:
        with cuts_of(spark, tmp_path, pg_dsn, sqlite_catalog_uri, GROUP, SCHEMA) as cuts:
            yield cuts
    finally:
        spark.conf.unset(IN_PROCESS_MERGE_CONF)


def source_rows(conn: psycopg.Connection[Any]) -> Counter[tuple[Any, ...]]:
    return Counter(conn.execute(f"SELECT {COLUMNS} FROM links").fetchall())


def mirror_rows(cuts: Cuts, cut_id: int) -> Counter[tuple[Any, ...]]:
    table = CutReader(cuts.catalog, GROUP.name).get(cut_id).to_arrow("links")
    return Counter(tuple(row[name] for name in ("src", "dst", "label", "doc")) for row in table.to_pylist())


def toast(rng: random.Random) -> str:
    """A value PostgreSQL stores out of line (TOAST): long and not compressible."""
    return "".join(rng.choice("0123456789abcdef") for _ in range(6000))


def random_transaction(conn: psycopg.Connection[Any], rng: random.Random) -> None:
    """One transaction of the keyless workload: rows are picked by ``ctid``, so one of several
    identical rows is changed alone."""
    rows = conn.execute(f"SELECT ctid::text, {COLUMNS} FROM links").fetchall()
    pick = rng.choice(rows)[0] if rows else "(0,0)"
    other = rng.choice(rows)[1:] if rows else (None, None, None, None)
    value = rng.choice([None, 0, 1, 2])
    with conn.transaction():
        match rng.choice(["duplicate", "insert", "onto", "swap", "delete", "bulk", "same", "toast", "retag"]):
            case "duplicate":  # an exact duplicate of an existing row
                conn.execute(f"INSERT INTO links SELECT {COLUMNS} FROM links WHERE ctid = %s::tid", (pick,))
            case "insert":
                conn.execute("INSERT INTO links VALUES (%s, %s, %s, NULL)", (value, rng.choice([None, 5]),
                                                                          rng.choice([None, "l0", "new"])))
            case "onto":  # a row takes another row's values
                conn.execute(f"UPDATE links SET ({COLUMNS}) = (%s, %s, %s, %s) WHERE ctid = %s::tid", (*other, pick))
            case "swap" if len(rows) > 1:  # two rows swap their labels in one statement
                first, second = rng.sample(rows, 2)
                conn.execute("UPDATE links SET label = CASE WHEN ctid = %s::tid THEN %s ELSE %s END "
                             "WHERE ctid IN (%s::tid, %s::tid)", (first[0], second[3], first[3], first[0], second[0]))
            case "delete":  # one row, however many identical rows there are
                conn.execute("DELETE FROM links WHERE ctid = %s::tid", (pick,))
            case "bulk":  # existing rows inserted again
                conn.execute(f"INSERT INTO links SELECT {COLUMNS} FROM links WHERE src IS NOT DISTINCT FROM %s",
                             (value,))
            case "same":  # an update to the same values changes nothing
                conn.execute("UPDATE links SET label = label WHERE ctid = %s::tid", (pick,))
            case "toast":
                conn.execute("UPDATE links SET doc = %s WHERE ctid = %s::tid", (toast(rng), pick))
            case _:  # another column of a row that may hold a TOASTed value
                conn.execute("UPDATE links SET dst = %s WHERE ctid = %s::tid", (value, pick))


def test_a_keyless_mirror_equals_its_source_as_a_multiset_after_every_run(
    cuts: Cuts, caplog: pytest.LogCaptureFixture
) -> None:
    rng = random.Random(32)
    caplog.set_level(logging.INFO, logger="airflow_provider_streambed.refresh")
    for run in range(1, 11):
        if run > 1:
            for _ in range(rng.randint(3, 8)):
                random_transaction(cuts.conn, rng)
        if run == 2:  # a TOASTed value, then an update of another column of its row (its new image marks it unchanged)
            cuts.conn.execute("INSERT INTO links VALUES (9, 9, 'toasted', %s), (9, 9, 'toasted', %s)",
                              (toast(rng), toast(rng)))
        if run == 3:
            cuts.conn.execute("UPDATE links SET dst = 10 WHERE label = 'toasted'")
        if run == 7:
            cuts.conn.execute("TRUNCATE links")
            cuts.conn.execute("INSERT INTO links VALUES (1, 1, 'a', NULL), (1, 1, 'a', NULL), (NULL, 2, NULL, NULL)")
            random_transaction(cuts.conn, rng)
        cut = cuts.publish(f"run{run}")
        assert mirror_rows(cuts, cut.cut_id) == source_rows(cuts.conn), f"run {run}"
        if run == 3:
            toasted = [row for row in mirror_rows(cuts, cut.cut_id).elements() if row[2] == "toasted"]
            assert [(row[1], len(row[3])) for row in toasted] == [(10, 6000), (10, 6000)]
    assert sum(source_rows(cuts.conn).values()) > len(source_rows(cuts.conn)), "the workload kept no duplicate"
    in_process = "merged in-process" in caplog.text
    assert in_process == (cuts.spark.conf.get(IN_PROCESS_MERGE_CONF) == "true")


@pytest.mark.parametrize("merge", ["in-process", "spark", "whole"])
def test_a_delete_of_a_row_the_previous_cut_lacks_fails_the_merge(spark: SparkSession, tmp_path: Path,
                                                                   merge: str) -> None:
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("v", pa.string())])
    model = TableModel("t", schema, ("id", "v"))
    for row in ({"id": 1, "v": "a"}, {"id": 1, "v": "a"}, {"id": 2, "v": None}):
        model._log("I", row)
    model.commit()
    group = RefreshGroup("diverged", "src", "cat", "ns", (Mirror("public.t"),))

    def keyless(directory: Path) -> TableCapture:
        return replace(model.flush(directory, "t"), key_columns=(), keyless=True)

    first = advance(None, run_job(spark, stage_spec(tmp_path, group, "r1", Lsn(model.lsn), [keyless(tmp_path / "c1")])))
    assert Counter(map(tuple, (row.values() for row in read_files(first["t"].files).to_pylist()))) == Counter(
        {(1, "a"): 2, (2, None): 1})
    for row in ({"id": 1, "v": "a"}, {"id": 1, "v": "a"}, {"id": 1, "v": "a"}):  # one more than the mirror holds
        model._log("D", row)
    model.commit()
    spec = stage_spec(tmp_path, group, "r2", Lsn(model.lsn), [keyless(tmp_path / "c2")], first, Lsn(1), 2)
    spec = replace(spec, rewrite={"t": "compaction"} if merge == "whole" else {})
    spark.conf.set(IN_PROCESS_MERGE_CONF, str(merge == "in-process").lower())
    try:
        with pytest.raises(Exception, match=r"fewer rows equal to rows the changes|does not hold") as failed:
            run_job(spark, spec)
    finally:
        spark.conf.unset(IN_PROCESS_MERGE_CONF)
    assert isinstance(failed.value, FinalRefreshError) and is_final(failed.value)  # no retry mends it
    if merge != "whole":  # the merge-on-read paths check before writing; a whole rewrite fails in the job
        assert "MirrorDivergedError: group 'diverged', member 't': the previous cut holds 1 fewer rows equal to rows " \
               "the changes delete than they delete: the mirror no longer equals its source table 'public.t'; resync " \
               "the member" in str(failed.value)


def test_the_in_process_merge_narrowed_by_a_probe_column_deletes_what_comparing_whole_rows_deletes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # rows sharing the probe's value (id 1) differ in the other column, NULL included; one is already deleted
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("v", pa.string())])
    data = tmp_path / "previous" / "part-0.parquet"
    data.parent.mkdir()
    pq.write_table(pa.table({"id": [1, 1, 1, 1, 2, None, 1], "v": ["a", "a", "b", None, "a", "a", "a"]},
                            schema=schema), data)
    deleted = tmp_path / "previous" / "deletes.parquet"
    pq.write_table(pa.table({"file_path": [data.as_uri()], "pos": [0]}, schema=DELETE_SCHEMA), deleted)
    model = TableModel("t", schema, ("id", "v"))
    for op, row in (("D", {"id": 1, "v": "a"}), ("D", {"id": 1, "v": "a"}), ("D", {"id": 1, "v": None}),
                    ("I", {"id": 2, "v": "a"})):
        model._log(op, row)
    model.commit()
    capture = replace(model.flush(tmp_path / "changes", "t"), key_columns=(), keyless=True)
    source = MirrorInput("g", Mirror("public.t"), capture, SnapshotFiles((data.as_uri(),), (deleted.as_uri(),)),
                         (), Lsn(1))
    probes: list[str | None] = []

    def recorded(removed: pa.Table) -> str | None:
        probes.append(probe_column(removed))
        return probes[-1]

    monkeypatch.setattr(merge_lookups, "probe_column", recorded)
    narrowed = merge_in_process(source)
    monkeypatch.setattr(merge_lookups, "probe_column", lambda removed: None)
    whole = merge_in_process(source)
    assert probes == ["id"] and narrowed is not None and whole is not None
    for merged in (narrowed, whole):
        assert merged.deletes is not None and sorted(merged.deletes.column("pos").to_pylist()) == [1, 3, 6]
        assert merged.rows.to_pylist() == [{"id": 2, "v": "a"}]
