"""Mirror merge on real Spark (in-process local[2]) against a model of the source table."""

from __future__ import annotations

import datetime as dt
import random
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from airflow_provider_streambed import storage
from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.exceptions import FinalRefreshError, RefreshError
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.member_declarations import Mirror
from airflow_provider_streambed.read.position_deletes import read_deletes
from airflow_provider_streambed.refresh.mirrors.duckdb_merge import IN_PROCESS_MERGE_CONF
from airflow_provider_streambed.refresh.spark.job import run_job
from airflow_provider_streambed.staging.iceberg_fields import DELETE_ROW
from airflow_provider_streambed.staging.members import read_member_manifest
from tests.integration.refresh.changelog_model import ACCOUNT_SCHEMA, TableModel, account_row, random_changes
from tests.integration.refresh.jobs import advance, capture_dir, read_files, read_staged, sorted_rows, stage_spec

pytestmark = pytest.mark.slow

GROUP = RefreshGroup("bank", "src", "cat", "ns", (Mirror("public.accounts"),))
KEY = ("region", "id")


def test_mirror_follows_random_changes_over_cuts(spark: SparkSession, tmp_path: Path) -> None:
    rng = random.Random(5)
    model = TableModel("accounts", ACCOUNT_SCHEMA, KEY, toastable=("note",))
    for ident in range(1, 41):  # rows before the slot's consistent point: only in the copy
        row = account_row(rng, rng.choice("ab"), ident)
        model.rows[model.key_of(row)] = row
    random_changes(model, rng, 15)  # after the consistent point, before the copy
    model.copy_rows()
    random_changes(model, rng, 15)  # after the copy
    previous = None
    prev_w = None
    reasons: list[str] = []
    for cut in range(1, 5):
        if cut > 1:
            random_changes(model, rng, 25)
            if cut == 3:
                model.truncate()
                model.commit()
                random_changes(model, rng, 10)
        run_key = f"run{cut}"
        capture = model.flush(capture_dir(tmp_path, GROUP, run_key, "accounts"), "accounts")
        watermark = Lsn(model.lsn)
        spec = stage_spec(tmp_path, GROUP, run_key, watermark, [capture], previous, prev_w, cut)
        staged = run_job(spark, spec)["accounts"]
        reasons.append(staged.reason)
        assert staged.incremental == (staged.reason == "merge-on-read"), f"cut {cut}: {staged.reason}"
        before = previous["accounts"].files.data if previous else ()
        previous, prev_w = advance(previous, {"accounts": staged}), watermark
        table = read_files(previous["accounts"].files)
        assert table.schema == ACCOUNT_SCHEMA.remove_metadata(), f"cut {cut}"
        assert sorted_rows(table, KEY) == model.truth(), f"cut {cut}"
        assert staged.key_columns == KEY
        assert staged.base_snapshot_id == (1000 + cut - 1 if staged.incremental else None)  # its base, for publish
        if staged.incremental:  # the previous files stay; new rows are only the changed keys' images
            assert previous["accounts"].files.data[: len(before)] == before
            assert staged.row_count < len(model.rows) and staged.deleted_rows > 0
    assert reasons[0] == "first cut" and reasons[2] == "truncated" and reasons.count("merge-on-read") >= 1, reasons


@pytest.mark.parametrize("in_process", ["true", "false"], ids=["in-process", "spark"])
def test_columns_added_dropped_renamed_and_widened_merge_on_read(
    spark: SparkSession, tmp_path: Path, in_process: str
) -> None:
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("v", pa.int32()), pa.field("gone", pa.string())])
    group = RefreshGroup("evolve", "src", "cat", "ns", (Mirror("public.t"),))
    model = TableModel("t", schema, ("id",))
    for ident in range(5):
        model.insert({"id": ident, "v": ident, "gone": "x"})
    model.commit()
    capture = model.flush(capture_dir(tmp_path, group, "r1", "t"), "t")
    first = advance(None, run_job(spark, stage_spec(tmp_path, group, "r1", Lsn(model.lsn), [capture])))
    model.update((3,), {"v": 33})  # before the DDL, in the same run: a segment of the old columns
    model.commit()
    before = model.flush(tmp_path / "c2a", "t")
    # ALTER TABLE t ADD COLUMN w text, DROP COLUMN gone, RENAME v TO value, ALTER value TYPE bigint
    model.schema = pa.schema([pa.field("id", pa.int64()), pa.field("value", pa.int64()), pa.field("w", pa.string())])
    model.insert({"id": 10, "value": 10, "w": "new"})
    model.update((1,), {"value": 100, "w": "set"})
    model.delete((2,))
    model.commit()
    after = model.flush(tmp_path / "c2b", "t")
    capture = replace(after, files=before.files + after.files, changes=before.changes + after.changes,
                      aliases={"value": ("v",)}, renamed={"v": "value"}, reshaped=True)
    spec = stage_spec(tmp_path, group, "r2", Lsn(model.lsn), [capture], first, Lsn(1), 2)
    spark.conf.set(IN_PROCESS_MERGE_CONF, in_process)
    try:
        staged = run_job(spark, spec)["t"]
    finally:
        spark.conf.unset(IN_PROCESS_MERGE_CONF)
    assert (staged.incremental, staged.reason, staged.renamed) == (True, "merge-on-read", {"v": "value"})
    assert read_staged(staged).schema.names == ["id", "value", "w"]  # the columns at W
    files = advance(first, {"t": staged})["t"].files
    assert files.data[0] == first["t"].files.data[0]  # the first cut's file stays
    live = read_files(files)
    rows = sorted(({"id": row["id"], "value": row["value"] if row.get("value") is not None else row["v"],
                    "w": row.get("w")} for row in live.to_pylist()), key=lambda row: row["id"])
    assert rows == [  # as a reader resolves the files by field id (the name mapping keeps "v")
        {"id": 0, "value": 0, "w": None},
        {"id": 1, "value": 100, "w": "set"},
        {"id": 3, "value": 33, "w": None},
        {"id": 4, "value": 4, "w": None},
        {"id": 10, "value": 10, "w": "new"},
    ]


@pytest.mark.parametrize(
    ("new_schema", "key", "message"),
    [
        (
            pa.schema([pa.field("id", pa.int64()), pa.field("v", pa.int32())]),
            ("id", "v"),
            r"table 'public.t'.*key changed from \['id'\] to \['id', 'v'\]",
        ),
    ],
    ids=["key"],
)
def test_a_changed_key_fails_and_stages_nothing(
    spark: SparkSession, tmp_path: Path, new_schema: pa.Schema, key: tuple[str, ...], message: str
) -> None:
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("v", pa.int32())])
    group = RefreshGroup("evolve", "src", "cat", "ns", (Mirror("public.t"),))
    model = TableModel("t", schema, ("id",))
    model.insert({"id": 1, "v": 1})
    model.commit()
    first = advance(None, run_job(spark, stage_spec(tmp_path, group, "r1", Lsn(model.lsn),
                                                    [model.flush(tmp_path / "c1", "t")])))
    changed = TableModel("t", new_schema, key, lsn=model.lsn)
    changed.insert({"id": 2, "v": 2})
    changed.commit()
    spec = stage_spec(tmp_path, group, "r2", Lsn(changed.lsn), [changed.flush(tmp_path / "c2", "t")], first, Lsn(1), 2)
    with pytest.raises(RefreshError, match=message):
        run_job(spark, spec)
    assert read_member_manifest(spec.staging_root, "t") is None


def test_unresolvable_toast_marker_fails(spark: SparkSession, tmp_path: Path) -> None:
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("doc", pa.string())])
    group = RefreshGroup("toast", "src", "cat", "ns", (Mirror("public.t"),))
    model = TableModel("t", schema, ("id",), toastable=("doc",))
    model.rows[(1,)] = {"id": 1, "doc": "big"}  # a row the changelog never saw
    model.update((1,), {}, unchanged_toast=True)
    model.commit()
    spec = stage_spec(tmp_path, group, "r1", Lsn(model.lsn), [model.flush(tmp_path / "c", "t")])
    with pytest.raises(FinalRefreshError, match=r"member 't'.*unchanged-TOAST value of column 'doc'.*resync"):
        run_job(spark, spec)  # final: a retry reads the same changelog and previous cut


@pytest.mark.parametrize("first_change", ["U", "D"])
def test_old_rows_in_deletes_need_each_changed_keys_first_change_to_delete_its_old_row(
    spark: SparkSession, tmp_path: Path, first_change: str
) -> None:
    """Spark's merge writes the deleted rows (REPLICA IDENTITY FULL: ``old_images``) from each key's
    first change; one that is not the delete of the old row fails the job as final."""
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("v", pa.string())])
    group = RefreshGroup("images", "src", "cat", "ns", (Mirror("public.t"),))
    model = TableModel("t", schema, ("id",))
    for ident in range(3):
        model.insert({"id": ident, "v": "old"})
    model.commit()
    first = advance(None, run_job(spark, stage_spec(tmp_path, group, "r1", Lsn(model.lsn),
                                                    [model.flush(tmp_path / "c1", "t")])))
    if first_change == "D":
        model._log("D", model.rows[(1,)])  # the whole old row, as under REPLICA IDENTITY FULL
    model.update((1,), {"v": "new"})
    model.commit()
    capture = replace(model.flush(tmp_path / "c2", "t"), old_images=True, field_ids={"id": 1, "v": 2})
    spec = stage_spec(tmp_path, group, "r2", Lsn(model.lsn), [capture], first, Lsn(1), 2)
    spark.conf.set(IN_PROCESS_MERGE_CONF, "false")
    try:
        if first_change == "U":
            with pytest.raises(FinalRefreshError, match=r"member 't'.*first change in the run is not a delete"):
                run_job(spark, spec)
            return
        staged = run_job(spark, spec)["t"]
    finally:
        spark.conf.unset(IN_PROCESS_MERGE_CONF)
    assert sorted_rows(read_files(advance(first, {"t": staged})["t"].files), ("id",)) == model.truth()
    rows = pa.concat_tables(read_deletes(staged.delete_files, storage.open_input))
    assert rows[DELETE_ROW].to_pylist() == [{"id": 1, "v": "old"}]


@pytest.mark.parametrize("deleted_again", [False, True], ids=["last-image", "deleted-again"])
def test_a_toast_marker_after_a_delete_of_its_key_fails(
    spark: SparkSession, tmp_path: Path, deleted_again: bool
) -> None:
    # DELETE id=2, then UPDATE id=1 SET id=2 leaving doc unchanged (no REPLICA IDENTITY FULL): the
    # marker's value is row 1's, which the changelog does not tie to key 2; the delete's null is
    # not an earlier image of key 2. Deleted again in the run, the marked row needs no value.
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("doc", pa.string())])
    group = RefreshGroup("toast", "src", "cat", "ns", (Mirror("public.t"),))
    model = TableModel("t", schema, ("id",), toastable=("doc",))
    model.insert({"id": 1, "doc": "x" * 50})
    model.insert({"id": 2, "doc": "y" * 50})
    model.commit()
    first = advance(None, run_job(spark, stage_spec(tmp_path, group, "r1", Lsn(model.lsn),
                                                    [model.flush(tmp_path / "c1", "t")])))
    model.delete((2,))
    model.update((1,), {"id": 2})  # D of key 1, then the new image of key 2
    model.pending[-1].update({"doc": None, "_toast_doc": True})  # its doc logged as unchanged
    if deleted_again:
        model.delete((2,))
    model.commit()
    spec = stage_spec(tmp_path, group, "r2", Lsn(model.lsn), [model.flush(tmp_path / "c2", "t")], first, Lsn(1), 2)
    if not deleted_again:
        with pytest.raises(FinalRefreshError, match=r"member 't'.*value of column 'doc' has no earlier image"):
            run_job(spark, spec)
        return
    assert sorted_rows(read_files(advance(first, run_job(spark, spec))["t"].files), ("id",)) == model.truth() == []


def test_changes_the_previous_cut_holds_are_not_applied_twice(spark: SparkSession, tmp_path: Path) -> None:
    # A capture that began before the previous cut was published replays that cut's changes
    # (DESIGN section 13: runs of one group raced): an append-only mirror must not keep them twice.
    group = RefreshGroup("events", "src", "cat", "ns", (Mirror("public.accounts", append_only=True),))
    rng = random.Random(11)
    model = TableModel("accounts", ACCOUNT_SCHEMA, KEY)
    for ident in range(1, 6):
        model.insert(account_row(rng, "a", ident))
        model.commit()
    first = model.flush(capture_dir(tmp_path, group, "run1", "accounts"), "accounts")
    w1 = Lsn(model.lsn)
    previous = advance(None, run_job(spark, stage_spec(tmp_path, group, "run1", w1, [first])))
    for ident in range(6, 9):
        model.insert(account_row(rng, "b", ident))
        model.commit()
    second = model.flush(capture_dir(tmp_path, group, "run2", "accounts"), "accounts")
    w2 = Lsn(model.lsn)
    previous = advance(previous, run_job(spark, stage_spec(tmp_path, group, "run2", w2, [second], previous, w1, 2)))
    for ident in range(9, 11):
        model.insert(account_row(rng, "c", ident))
        model.commit()
    third = model.flush(capture_dir(tmp_path, group, "run3", "accounts"), "accounts")
    replayed = replace(third, files=second.files + third.files, changes=second.changes + third.changes)
    staged = run_job(spark, stage_spec(tmp_path, group, "run3", Lsn(model.lsn), [replayed], previous, w2, 3))
    assert staged["accounts"].incremental and not staged["accounts"].delete_files  # append-only: files added
    assert sorted_rows(read_files(advance(previous, staged)["accounts"].files), KEY) == model.truth()


@pytest.mark.parametrize("in_process", ["true", "false"], ids=["in-process", "spark"])
def test_date_keys_of_any_year_bound_the_key_range(spark: SparkSession, tmp_path: Path, in_process: str) -> None:
    # Spark's merge reads the previous rows in the changed keys' range: dates before the Gregorian
    # reform and below year 1000 (PostgreSQL's -infinity is 0001-01-01) must bound it as they are
    schema = pa.schema([pa.field("d", pa.date32()), pa.field("v", pa.string())])
    group = RefreshGroup("dates", "src", "cat", "ns", (Mirror("public.t"),))
    model = TableModel("t", schema, ("d",))
    days = [dt.date(1, 1, 1), dt.date(999, 12, 31), dt.date(1582, 10, 10), dt.date(2024, 2, 29)]
    for day in days:
        model.insert({"d": day, "v": "old"})
    model.commit()
    first = advance(None, run_job(spark, stage_spec(tmp_path, group, "r1", Lsn(model.lsn),
                                                    [model.flush(tmp_path / "c1", "t")])))
    for day in days[:3]:
        model.update((day,), {"v": "new"})
    model.commit()
    spec = stage_spec(tmp_path, group, "r2", Lsn(model.lsn), [model.flush(tmp_path / "c2", "t")], first, Lsn(1), 2)
    spark.conf.set(IN_PROCESS_MERGE_CONF, in_process)
    try:
        staged = run_job(spark, spec)["t"]
    finally:
        spark.conf.unset(IN_PROCESS_MERGE_CONF)
    assert staged.incremental
    assert sorted_rows(read_files(advance(first, {"t": staged})["t"].files), ("d",)) == model.truth()
