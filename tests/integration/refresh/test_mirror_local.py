"""The in-process mirror merge (DuckDB) against a model of the source table and against Spark's merge."""

from __future__ import annotations

import logging
import random
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.member_declarations import Mirror
from airflow_provider_streambed.refresh.mirrors import duckdb_merge
from airflow_provider_streambed.refresh.mirrors.duckdb_merge import IN_PROCESS_MERGE_CONF, merge_in_process
from airflow_provider_streambed.refresh.mirrors.merge_input import MirrorInput, mirror_input
from airflow_provider_streambed.refresh.mirrors.merge_output import LocalMirrorOutput
from airflow_provider_streambed.refresh.mirrors.spark_merge import merge_mirror
from airflow_provider_streambed.refresh.spark.job import run_job
from airflow_provider_streambed.staging import MemberManifest, SnapshotFiles, TableCapture
from tests.integration.refresh.changelog_model import ACCOUNT_SCHEMA, TableModel, account_row, random_changes
from tests.integration.refresh.jobs import advance, capture_dir, read_files, read_staged, sorted_rows, stage_spec

pytestmark = pytest.mark.slow

GROUP = RefreshGroup("bank", "src", "cat", "ns", (Mirror("public.accounts"),))
KEY = ("region", "id")


def deleted_positions(uris: tuple[str, ...]) -> list[tuple[str, int]]:
    """The ``(file_path, pos)`` rows of position-delete files, in order (a row deleted twice shows twice)."""
    return [(row["file_path"], row["pos"]) for uri in uris for row in pq.read_table(uri.removeprefix("file://"))
            .to_pylist()]


def test_in_process_merge_follows_random_changes_as_spark_does(
    spark: SparkSession, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    rng = random.Random(23)
    # unchanged-TOAST values too: their values come from the key's earlier change or its previous row
    model = TableModel("accounts", ACCOUNT_SCHEMA, KEY, toastable=("note",))
    for ident in range(1, 61):
        model.insert(account_row(rng, rng.choice("ab"), ident))
    model.commit()
    previous, prev_w = None, None
    for cut in range(1, 7):
        if cut > 1:
            random_changes(model, rng, 20, truncates=False)  # updates, deletes, key changes, inserts
        run_key = f"run{cut}"
        capture = model.flush(capture_dir(tmp_path, GROUP, run_key, "accounts"), "accounts")
        spec = stage_spec(tmp_path, GROUP, run_key, Lsn(model.lsn), [capture], previous, prev_w, cut)
        caplog.clear()
        with caplog.at_level(logging.INFO, logger=duckdb_merge.__name__):
            staged: MemberManifest = run_job(spark, spec)["accounts"]
        in_process = "merged in-process" in caplog.text
        assert in_process == (cut > 1), f"cut {cut}: {caplog.text}"
        if in_process:  # Spark's merge of the same input deletes the same rows and writes the same images
            source = mirror_input(spec, GROUP, GROUP.members[0], capture)
            by_spark = merge_mirror(spark, source)
            assert by_spark.incremental and by_spark.deletes is not None
            assert deleted_positions(staged.delete_files) == sorted((row.file_path, row.pos)
                                                                    for row in by_spark.deletes.collect()), f"cut {cut}"
            assert sorted_rows(read_staged(staged), KEY) == sorted(
                (row.asDict() for row in by_spark.rows.collect()), key=lambda row: tuple(row[name] for name in KEY))
            assert pq.read_schema(staged.files[0].removeprefix("file://")).remove_metadata() == pq.read_schema(
                source.previous.data[0].removeprefix("file://")).remove_metadata()  # shaped as the previous files
        previous, prev_w = advance(previous, {"accounts": staged}), Lsn(model.lsn)
        assert sorted_rows(read_files(previous["accounts"].files), KEY) == model.truth(), f"cut {cut}"


@contextmanager
def spark_conf(spark: SparkSession, key: str, value: str) -> Iterator[None]:
    spark.conf.set(key, value)
    try:
        yield
    finally:
        spark.conf.unset(key)


@pytest.mark.parametrize(
    ("change", "reason"),
    [("toast after a truncate", "unchanged-TOAST values with no previous row"), ("turned off", None)],
)
def test_spark_merges_what_the_in_process_merge_does_not_take(
    spark: SparkSession, tmp_path: Path, caplog: pytest.LogCaptureFixture, change: str, reason: str | None
) -> None:
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("note", pa.string())])
    group = RefreshGroup("fallback", "src", "cat", "ns", (Mirror("public.t"),))
    model = TableModel("t", schema, ("id",), toastable=("note",))
    for ident in range(5):
        model.insert({"id": ident, "note": f"n{ident}"})
    model.commit()
    first = advance(None, run_job(spark, stage_spec(tmp_path, group, "r1", Lsn(model.lsn),
                                                    [model.flush(tmp_path / "c1", "t")])))
    model.delete((0,))
    if change == "toast after a truncate":  # the marked value's row is gone: unknown, Spark says so
        model.truncate()
        model.insert({"id": 1, "note": "again"})
        model.commit()
        model.update((1,), {}, unchanged_toast=True)
    model.commit()
    spec = stage_spec(tmp_path, group, "r2", Lsn(model.lsn), [model.flush(tmp_path / "c2", "t")], first, Lsn(1), 2)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger=duckdb_merge.__name__), \
            spark_conf(spark, IN_PROCESS_MERGE_CONF, "false" if reason is None else "true"):
        staged = run_job(spark, spec)
    assert "merged in-process" not in caplog.text
    if reason is not None:
        assert f"member=t: merged by Spark: {reason}" in caplog.text
    rows = [{name: row.get(name) for name in model.schema.names} for row in model.truth()]
    assert sorted_rows(read_files(advance(first, staged)["t"].files), ("id",)) == rows


@pytest.mark.parametrize("in_process", ["true", "false"], ids=["in-process", "spark"])
@pytest.mark.parametrize("kind", ["keyed", "keyless", "append-only"])
def test_a_truncate_among_the_changes_writes_the_mirror_whole(
    spark: SparkSession, tmp_path: Path, caplog: pytest.LogCaptureFixture, kind: str, in_process: str
) -> None:
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("note", pa.string())])
    group = RefreshGroup("truncating", "src", "cat", "ns", (Mirror("public.t", append_only=kind == "append-only"),))
    model = TableModel("t", schema, ("id",))
    for ident in range(5):
        model.insert({"id": ident, "note": f"n{ident}"})
    model.commit()

    def capture(directory: Path) -> TableCapture:
        flushed = model.flush(directory, "t")
        return replace(flushed, key_columns=(), keyless=True) if kind == "keyless" else flushed

    first = advance(None, run_job(spark, stage_spec(tmp_path, group, "r1", Lsn(model.lsn), [capture(tmp_path / "c1")])))
    model.delete((0,))
    model.truncate()
    model.insert({"id": 7, "note": "after"})
    model.insert({"id": 8, "note": "after"})
    if kind != "append-only":
        model.delete((8,))  # a keyless delete names the whole row: the model logs only the key here
        model.pending[-1]["note"] = "after"
    model.commit()
    spec = stage_spec(tmp_path, group, "r2", Lsn(model.lsn), [capture(tmp_path / "c2")], first, Lsn(1), 2)
    with caplog.at_level(logging.INFO, logger=duckdb_merge.__name__), \
            spark_conf(spark, IN_PROCESS_MERGE_CONF, in_process):
        staged = run_job(spark, spec)
    assert ("member=t: rewritten whole in-process (truncated)" in caplog.text) == (in_process == "true")
    assert not staged["t"].incremental and not staged["t"].delete_files
    rows = sorted_rows(read_files(advance(first, staged)["t"].files), ("id",))
    assert rows == [{"id": 7, "note": "after"}] + ([{"id": 8, "note": "after"}] if kind == "append-only" else [])


def test_a_mirror_over_an_empty_previous_snapshot_is_written_whole_in_process(
    spark: SparkSession, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # the first cut of a table copied empty: no previous file, the changes merged on nothing (no JVM)
    model = TableModel("t", pa.schema([pa.field("id", pa.int64()), pa.field("note", pa.string())]), ("id",))
    model.insert({"id": 1, "note": "a"})
    model.insert({"id": 2, "note": "b"})
    model.commit()
    model.update((1,), {"note": "c"})
    model.delete((2,))
    model.commit()
    group = RefreshGroup("empty", "src", "cat", "ns", (Mirror("public.t"),))
    spec = stage_spec(tmp_path, group, "r1", Lsn(model.lsn), [model.flush(tmp_path / "c1", "t")])
    with caplog.at_level(logging.INFO, logger=duckdb_merge.__name__):
        staged = run_job(spark, spec)
    assert "member=t: rewritten whole in-process (first cut): 1 rows" in caplog.text
    assert not staged["t"].incremental and sorted_rows(read_staged(staged["t"]), ("id",)) == [{"id": 1, "note": "c"}]


def test_new_images_take_the_columns_at_w_not_the_previous_files(tmp_path: Path) -> None:
    # the previous files say `note` is never null (a copy of a NOT NULL column); a change now nulls it
    # (DROP NOT NULL): the new image is written with the changelog's columns, publish relaxes the table's
    shape = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("note", pa.string(), nullable=False)])
    previous = tmp_path / "previous.parquet"
    pq.write_table(pa.table({"id": [1, 2], "note": ["a", "b"]}, schema=shape), previous)
    model = TableModel("t", pa.schema([pa.field("id", pa.int64()), pa.field("note", pa.string())]), ("id",))
    model.rows[(1,)] = {"id": 1, "note": "a"}
    model.update((1,), {"note": None})
    model.commit()
    capture = model.flush(tmp_path / "changes", "t")
    source = MirrorInput("g", Mirror("public.t"), capture, SnapshotFiles((previous.as_uri(),)), ("id",), Lsn(1))
    merged = merge_in_process(source)
    assert merged is not None and merged.rows.to_pylist() == [{"id": 1, "note": None}]
    assert merged.rows.schema.field("note").nullable


def merge_one_update(tmp_path: Path, previous: pa.Table, key: tuple[str, ...], changed: dict[str, object],
                     directory: str = "previous") -> LocalMirrorOutput | None:
    """``merge_in_process`` of one update of the previous file's first row."""
    path = tmp_path / directory / "part-0.parquet"
    path.parent.mkdir(parents=True)
    pq.write_table(previous, path)
    model = TableModel("t", previous.schema, key)
    first = previous.slice(0, 1).to_pylist()[0]
    model.rows[model.key_of(first)] = first
    model.update(model.key_of(first), changed)
    model.commit()
    capture = model.flush(tmp_path / "changes", "t")
    return merge_in_process(MirrorInput("g", Mirror("public.t"), capture, SnapshotFiles((path.as_uri(),)), key, Lsn(1)))


def test_a_key_column_named_like_a_directory_partition_is_read_from_the_file(tmp_path: Path) -> None:
    # a warehouse under .../tenant=acme/...: DuckDB must not take `tenant` from the path
    previous = pa.table({"tenant": ["t1", "t2"], "id": [1, 2], "v": ["a", "b"]})
    merged = merge_one_update(tmp_path, previous, ("tenant", "id"), {"v": "new"}, directory="tenant=acme/data")
    assert merged is not None and merged.deletes is not None
    assert merged.deletes.column("pos").to_pylist() == [0] and merged.rows.to_pylist() == [
        {"tenant": "t1", "id": 1, "v": "new"}]


def test_a_source_column_named_like_a_toast_marker_is_a_column(tmp_path: Path) -> None:
    previous = pa.table({"id": [1, 2], "_toast_note": ["hello", "world"]})
    merged = merge_one_update(tmp_path, previous, ("id",), {"_toast_note": "bye"})
    assert merged is not None and merged.rows.to_pylist() == [{"id": 1, "_toast_note": "bye"}]


@pytest.mark.parametrize(
    ("case", "reason"),
    [("object store", "previous files on gs:// are read by Spark only"),
     ("case", "column names differ only in case"),
     ("size", "1 changes (more than 0)")],
)
def test_what_the_in_process_merge_leaves_to_spark(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch, case: str, reason: str
) -> None:
    previous = pa.table({"ID": [10, 20], "id": [1, 2]} if case == "case" else {"id": [1, 2], "v": ["a", "b"]})
    changed: dict[str, object] = {"ID": 11} if case == "case" else {"v": "new"}
    if case == "size":
        monkeypatch.setattr(duckdb_merge, "MAX_CHANGES", 0)
    if case == "object store":  # S3 is read in place (tests/integration/rest/test_s3_staging.py), other stores not
        monkeypatch.setattr(SnapshotFiles, "readable", lambda files: (("gs://warehouse/t/data/part-0.parquet",), ()))
    with caplog.at_level(logging.INFO, logger=duckdb_merge.__name__):
        assert merge_one_update(tmp_path, previous, ("id",), changed) is None
    assert f"merged by Spark: {reason}" in caplog.text
