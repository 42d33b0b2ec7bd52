"""The in-process mirror merge (DuckDB) against a model of the source table and against Spark's merge."""

from __future__ import annotations

import logging
import random
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from airflow_provider_streambed.declarations import Mirror, RefreshGroup
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.refresh import mirror_local
from airflow_provider_streambed.refresh.job import mirror_input, run_job
from airflow_provider_streambed.refresh.mirror import MirrorInput, merge_mirror
from airflow_provider_streambed.refresh.mirror_local import IN_PROCESS_MERGE_CONF, merge_in_process
from airflow_provider_streambed.staging import MemberManifest, SnapshotFiles
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
    model = TableModel("accounts", ACCOUNT_SCHEMA, KEY)  # no unchanged-TOAST values: every later cut merges here
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
        with caplog.at_level(logging.INFO, logger=mirror_local.__name__):
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
    [("toast", "unchanged-TOAST values"), ("truncate", "truncated"), ("column", "the columns changed"),
     ("turned off", None)],
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
    if change == "toast":
        model.update((1,), {}, unchanged_toast=True)
    elif change == "truncate":
        model.truncate()
        model.insert({"id": 7, "note": "after"})
    elif change == "column":
        model.schema = schema.append(pa.field("extra", pa.int32()))
        model.insert({"id": 8, "note": "new", "extra": 1})
    model.commit()
    spec = stage_spec(tmp_path, group, "r2", Lsn(model.lsn), [model.flush(tmp_path / "c2", "t")], first, Lsn(1), 2)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger=mirror_local.__name__), \
            spark_conf(spark, IN_PROCESS_MERGE_CONF, "false" if reason is None else "true"):
        staged = run_job(spark, spec)
    assert "merged in-process" not in caplog.text
    if reason is not None:
        assert f"member=t: merged by Spark: {reason}" in caplog.text
    rows = [{name: row.get(name) for name in model.schema.names} for row in model.truth()]
    assert sorted_rows(read_files(advance(first, staged)["t"].files), ("id",)) == rows


def test_a_value_the_previous_files_refuse_leaves_the_merge_to_spark(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # the previous files say `note` is never null (a copy of a NOT NULL column); a change now nulls it
    shape = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("note", pa.string(), nullable=False)])
    previous = tmp_path / "previous.parquet"
    pq.write_table(pa.table({"id": [1, 2], "note": ["a", "b"]}, schema=shape), previous)
    model = TableModel("t", pa.schema([pa.field("id", pa.int64()), pa.field("note", pa.string())]), ("id",))
    model.rows[(1,)] = {"id": 1, "note": "a"}
    model.update((1,), {"note": None})
    model.commit()
    capture = model.flush(tmp_path / "changes", "t")
    source = MirrorInput("g", Mirror("public.t"), capture, SnapshotFiles((previous.as_uri(),)), ("id",), Lsn(1))
    with caplog.at_level(logging.INFO, logger=mirror_local.__name__):
        assert merge_in_process(source) is None
    assert "merged by Spark: the in-process merge failed: ValueError: Casting field 'note'" in caplog.text
