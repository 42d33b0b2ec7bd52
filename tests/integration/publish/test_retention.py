"""Cut retention against a real catalog: expiry inside publish, pins, file collection, readers.

The group has a whole member (``accounts``, replaced each cut), one carried over between cuts
(``totals``, republished every third cut only) and a merge-on-read member (``events``: each cut
adds a row, every fourth deletes the previous one by position), so kept snapshots keep reading
data files that much older, expired runs wrote.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import signal
import subprocess
import sys
import threading
from collections.abc import Collection, Iterator
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
from pyarrow import fs
from pyiceberg.catalog import MetastoreCatalog
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.table import StaticTable, TableProperties
from pyspark.sql import SparkSession

from airflow_provider_streambed.catalog import warehouse_of
from airflow_provider_streambed.declarations import CutRetention, RefreshGroup
from airflow_provider_streambed.exceptions import CutExpiredError, CutNotFoundError
from airflow_provider_streambed.ledger import CutRecord, Ledger, cut_tag
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.member_declarations import SqlMember
from airflow_provider_streambed.publish import publish_cut
from airflow_provider_streambed.publish.attempts import Attempt
from airflow_provider_streambed.publish.expiry import ExpiryPlan, ExpiryPlanner
from airflow_provider_streambed.publish.staged import run_data_dir
from airflow_provider_streambed.read import Cut, CutReader
from airflow_provider_streambed.retention.gc import collect_garbage, path_of
from airflow_provider_streambed.retention.maintenance import apply_retention, apply_retention_after_publish
from airflow_provider_streambed.retention.plan import publish_expiry
from airflow_provider_streambed.run_key import make_run_key
from airflow_provider_streambed.testing.spark import local_spark_session
from tests.integration.publish.helpers import bank_tables, stage, stage_delta

pytestmark = pytest.mark.slow

GROUP = RefreshGroup(
    name="bank",
    source_conn_id="src",
    catalog_conn_id="cat",
    namespace="ns",
    members=tuple(SqlMember(name=name, query="select 1") for name in ("accounts", "totals", "events")),
    retention=CutRetention(keep_last=3, keep_newer_than=dt.timedelta(0), delete_files_after=dt.timedelta(0)),
)


def with_retention(**changes: object) -> RefreshGroup:
    """``GROUP`` with its retention changed."""
    assert GROUP.retention is not None
    return dataclasses.replace(GROUP, retention=dataclasses.replace(GROUP.retention, **changes))


def expected_events(k: int) -> list[int]:
    """``events`` at cut ``k``: ids 1..k, less each id ``j`` whose successor ``j + 1`` is a multiple of 4."""
    return [j for j in range(1, k + 1) if not ((j + 1) % 4 == 0 and j + 1 <= k)]


def publish_run(
    catalog: SqlCatalog, ledger: Ledger, group: RefreshGroup, k: int, dag_id: str = "",
    expire: ExpiryPlanner | None = None,
) -> CutRecord:
    """Pin, stage and publish run ``r<k>`` as cut ``k`` (see the module docstring), the expiry in
    its commit (``expire``, else the group's) and the retention applied after it, as a run does;
    with ``dag_id``, the run key an Airflow run ``r<k>`` of that DAG gets."""
    def key(number: int) -> str:
        return make_run_key(dag_id, f"r{number}") if dag_id else f"r{number}"

    warehouse, run_key, watermark = warehouse_of(catalog), key(k), Lsn(100 * k)
    ledger.pin_run(group.name, run_key, watermark)
    tables = bank_tables(k) if k % 3 == 1 else {"accounts": bank_tables(k)["accounts"]}
    manifests = stage(warehouse, group.name, run_key, watermark, tables)
    events = pa.table({"id": pa.array([k], pa.int64())})
    if k == 1:
        manifests |= stage(warehouse, group.name, run_key, watermark, {"events": events})
    else:
        location = catalog.load_table(("ns", "events")).location()
        deleted = [(f"{run_data_dir(location, key(k - 1))}/part-00000-r{k - 1}.parquet", 0)] if k % 4 == 0 else []
        manifests["events"] = stage_delta(warehouse, group.name, run_key, watermark, "events", events, deleted)
    carried = () if "totals" in manifests else ("totals",)
    cut = publish_cut(catalog, ledger, group, run_key, manifests, carried=carried,
                      expire=expire or publish_expiry(ledger, group))
    apply_retention_after_publish(catalog, ledger, group)
    return cut


def check_cut(cut: Cut) -> None:
    """The cut's members read as published (pyiceberg)."""
    accounts = cut.to_arrow("accounts")
    assert set(accounts.column("version").to_pylist()) == {cut.cut_id}
    totals_version = cut.cut_id - (cut.cut_id - 1) % 3
    assert cut.to_arrow("totals").column("version").to_pylist() == [totals_version]
    assert sorted(cut.to_arrow("events").column("id").to_pylist()) == expected_events(cut.cut_id)


def files_on_disk(catalog: SqlCatalog, table: str) -> set[str]:
    location = catalog.load_table(("ns", table)).location()
    filesystem, base = fs.FileSystem.from_uri(location)
    selector = fs.FileSelector(base, recursive=True)
    return {info.path for info in filesystem.get_file_info(selector) if info.type == fs.FileType.File}


def needed_files(catalog: SqlCatalog, ledger: Ledger, table: str) -> set[str]:
    """What the table's current metadata and the kept cuts need, by pyiceberg's own inspection."""
    current = catalog.load_table(("ns", table))
    static = StaticTable.from_metadata(current.metadata_location)
    needed = {path_of(current.metadata_location)}
    needed |= {path_of(entry.metadata_file) for entry in current.metadata.metadata_log}
    needed |= {path_of(cut.members[table].metadata_location) for cut in ledger.list_cuts("bank")}
    needed |= {path_of(snapshot.manifest_list) for snapshot in current.metadata.snapshots}
    needed |= {path_of(path) for path in static.inspect.all_manifests().column("path").to_pylist()}
    needed |= {path_of(path) for path in static.inspect.all_files().column("file_path").to_pylist()}
    return needed


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    yield local_spark_session("streambed-retention-tests")


def test_thirty_runs_keep_the_newest_three_and_the_pinned_cut(
    catalog: SqlCatalog, ledger: Ledger, spark: SparkSession
) -> None:
    for k in range(1, 31):
        publish_run(catalog, ledger, GROUP, k)
        if k == 5:
            ledger.pin_cut("bank", 5)

    reader = CutReader(catalog, "bank")
    assert [(cut.cut_id, cut.pinned_at is not None) for cut in reader.list()] == [
        (5, True), (28, False), (29, False), (30, False)]
    for table in ("accounts", "totals", "events"):
        current = catalog.load_table(("ns", table))
        kept = {cut.cut_id: cut.members[table].snapshot_id for cut in reader.list()}
        assert set(current.metadata.refs) == {"main"} | {cut_tag("bank", k) for k in kept}
        assert {snapshot.snapshot_id for snapshot in current.metadata.snapshots} == set(kept.values())
        assert len(current.metadata.metadata_log) == 3  # previous-versions-max set to keep_last
        assert current.metadata.properties[TableProperties.METADATA_PREVIOUS_VERSIONS_MAX] == "3"
        # one metadata version per cut: the publish commits expired the old cuts, no separate commit did
        assert MetastoreCatalog._parse_metadata_version(current.metadata_location) == 29
        assert files_on_disk(catalog, table) == needed_files(catalog, ledger, table), table
        data = Path(path_of(current.location())) / "data"
        assert all(any(run.iterdir()) for run in data.iterdir()), "emptied run directories stay"

    for cut in (reader.get(5), reader.latest()):
        check_cut(cut)
        assert cut.verify() == []
        con = cut.to_duckdb(duckdb.connect())
        assert sorted(row[0] for row in con.execute("select id from events").fetchall()) == expected_events(cut.cut_id)
        assert con.execute("select distinct version from accounts").fetchall() == [(cut.cut_id,)]
        frames = cut.to_spark(spark)
        assert sorted(row["id"] for row in frames["events"].toArrow().to_pylist()) == expected_events(cut.cut_id)
    with pytest.raises(CutExpiredError, match=r"cut 7 \(W=0/2BC\), which expired at 20") as expired:
        reader.get(7)
    assert isinstance(expired.value, CutNotFoundError) and expired.value.expired_at is not None
    with pytest.raises(CutExpiredError, match="the newest cut at or before LSN 0/2C0 is cut 7"):
        reader.as_of_lsn(Lsn(704))
    assert reader.as_of_lsn(Lsn(599)).cut_id == 5
    with pytest.raises(CutNotFoundError, match="has no cut 99"):
        reader.get(99)


def test_the_files_of_airflow_runs_are_collected_too(catalog: SqlCatalog, ledger: Ledger) -> None:
    group = with_retention(keep_last=1)  # Airflow's run keys have dots: their data directories are renamed
    for k in range(1, 9):
        publish_run(catalog, ledger, group, k, dag_id="bank")
    assert [cut.cut_id for cut in ledger.list_cuts("bank")] == [8]
    for table in ("accounts", "totals", "events"):
        assert files_on_disk(catalog, table) == needed_files(catalog, ledger, table), table


def test_pins_choose_what_survives_and_an_expired_cut_cannot_be_pinned(catalog: SqlCatalog, ledger: Ledger) -> None:
    for k in range(1, 4):
        publish_run(catalog, ledger, GROUP, k)
    ledger.pin_cut("bank", 1)
    ledger.pin_cut("bank", 1, pinned=False)
    publish_run(catalog, ledger, GROUP, 4)
    assert [cut.cut_id for cut in ledger.list_cuts("bank")] == [2, 3, 4]
    with pytest.raises(CutExpiredError, match="cut 1 "):
        ledger.pin_cut("bank", 1)
    ledger.pin_cut("bank", 2)
    for k in range(5, 8):
        publish_run(catalog, ledger, GROUP, k)
    assert [cut.cut_id for cut in ledger.list_cuts("bank")] == [2, 5, 6, 7]
    ledger.pin_cut("bank", 2, pinned=False)
    assert apply_retention(catalog, ledger, GROUP).expiry.cut_ids == (2,)
    assert [cut.cut_id for cut in ledger.list_cuts("bank")] == [5, 6, 7]
    check_cut(CutReader(catalog, "bank").get(5))


def test_keep_newer_than_keeps_young_cuts_and_a_backlog_expires_later(catalog: SqlCatalog, ledger: Ledger) -> None:
    young = with_retention(keep_newer_than=dt.timedelta(hours=1))
    for k in range(1, 7):
        publish_run(catalog, ledger, young, k)
    assert [cut.cut_id for cut in ledger.list_cuts("bank")] == [1, 2, 3, 4, 5, 6]
    later = dt.datetime.now(dt.UTC) + dt.timedelta(hours=2)
    dry = apply_retention(catalog, ledger, young, dry_run=True, now=later)
    assert dry.expiry.cut_ids == (1, 2, 3) and len(ledger.list_cuts("bank")) == 6
    report = apply_retention(catalog, ledger, young, now=later)
    assert report.expiry.cut_ids == (1, 2, 3) and report.gc is not None and report.gc.deleted
    assert [cut.cut_id for cut in ledger.list_cuts("bank")] == [4, 5, 6]
    for table in ("accounts", "totals", "events"):
        assert files_on_disk(catalog, table) == needed_files(catalog, ledger, table), table
    for cut in CutReader(catalog, "bank").list():
        check_cut(cut)


def test_a_table_that_sets_its_metadata_log_length_keeps_it(catalog: SqlCatalog, ledger: Ledger) -> None:
    publish_run(catalog, ledger, GROUP, 1)
    table = catalog.load_table(("ns", "accounts"))
    table.transaction().set_properties({TableProperties.METADATA_PREVIOUS_VERSIONS_MAX: "5"}).commit_transaction()
    for k in range(2, 12):
        publish_run(catalog, ledger, GROUP, k)
    assert len(catalog.load_table(("ns", "accounts")).metadata.metadata_log) == 5
    assert len(catalog.load_table(("ns", "events")).metadata.metadata_log) == 3


def test_readers_keep_reading_while_cuts_expire_and_files_are_collected(catalog: SqlCatalog, ledger: Ledger) -> None:
    group = with_retention(delete_files_after=dt.timedelta(hours=1))
    for k in range(1, 4):
        publish_run(catalog, ledger, group, k)
    ledger.pin_cut("bank", 1)
    reader = CutReader(catalog, "bank")
    held = [reader.get(1), reader.get(3)]  # cut 3 expires below; cut 1 is pinned
    stop, failures, reads = threading.Event(), [], [0]

    def read() -> None:
        while not stop.is_set():
            try:
                for cut in held:
                    check_cut(cut)
                reads[0] += 1
            except Exception as error:  # collected for the assertion below
                failures.append(error)
                return

    thread = threading.Thread(target=read)
    thread.start()
    try:
        for k in range(4, 12):
            publish_run(catalog, ledger, group, k)
            apply_retention(catalog, ledger, group)
    finally:
        stop.set()
        thread.join()
    assert failures == [] and reads[0] > 0
    assert [cut.cut_id for cut in ledger.list_cuts("bank")] == [1, 9, 10, 11]
    waiting = collect_garbage(catalog, ledger, "bank", dt.timedelta(hours=1))
    assert waiting.pending > 0 and waiting.deleted == ()
    for cut in held:
        check_cut(cut)  # expired cut 3 still reads: its files wait for delete_files_after

    later = dt.datetime.now(dt.UTC) + dt.timedelta(hours=2)
    collected = collect_garbage(catalog, ledger, "bank", dt.timedelta(hours=1), now=later)
    assert collected.pending == 0 and len(collected.deleted) == waiting.pending
    check_cut(reader.get(1))
    with pytest.raises(FileNotFoundError):  # what a reader holding an expired cut sees once its files are gone
        held[1].to_arrow("accounts")


def test_an_unpublished_run_keeps_its_files_through_collection(catalog: SqlCatalog, ledger: Ledger) -> None:
    for k in range(1, 5):
        publish_run(catalog, ledger, dataclasses.replace(GROUP, retention=None), k)  # a backlog to collect
    warehouse = warehouse_of(catalog)
    # run r5 pinned and staged, and (as a publish that failed after moving them) a file in its table directory
    ledger.pin_run("bank", "r5", Lsn(500))
    staged = stage(warehouse, "bank", "r5", Lsn(500), {"accounts": bank_tables(5)["accounts"]})
    moved = Path(path_of(catalog.load_table(("ns", "accounts")).location())) / "data" / "r5" / "part-early.parquet"
    moved.parent.mkdir(parents=True)
    moved.write_bytes(Path(path_of(staged["accounts"].files[0])).read_bytes())
    stray = moved.parent.parent / "part-stray.parquet"  # not in any run's directory: not ours to judge
    stray.write_bytes(moved.read_bytes())

    report = apply_retention(catalog, ledger, GROUP)
    assert report.expiry.cut_ids == (1,) and report.gc is not None and report.gc.deleted
    assert moved.exists() and stray.exists()
    assert all(Path(path_of(uri)).exists() for uri in staged["accounts"].files)

    moved.unlink()
    stray.unlink()
    assert publish_run(catalog, ledger, GROUP, 5).cut_id == 5
    check_cut(CutReader(catalog, "bank").latest())


def test_a_crash_in_expiry_or_collection_leaves_kept_cuts_readable_and_the_next_run_finishes(
    catalog_props: dict[str, str], catalog: SqlCatalog, ledger: Ledger
) -> None:
    for k in range(1, 11):
        publish_run(catalog, ledger, dataclasses.replace(GROUP, retention=None), k)  # a backlog of 7 due cuts

    def killed_at(point: str) -> None:
        worker = subprocess.run(
            [sys.executable, "-m", "tests.integration.publish.retention_worker", json.dumps(catalog_props),
             json.dumps(GROUP.to_dict()), point], cwd=Path(__file__).parents[3], capture_output=True, text=True,
            timeout=300,
        )
        assert worker.returncode == -signal.SIGKILL, worker.stderr

    killed_at("expiry-commit")
    assert [cut.cut_id for cut in ledger.list_cuts("bank")] == list(range(1, 11))  # nothing expired
    for cut in CutReader(catalog, "bank").list():
        check_cut(cut)

    killed_at("gc-delete")  # this run expires cuts 1-7, then dies halfway through their files
    assert [cut.cut_id for cut in ledger.list_cuts("bank")] == [8, 9, 10]
    for cut in CutReader(catalog, "bank").list():
        check_cut(cut)
        assert cut.verify() == []

    report = apply_retention(catalog, ledger, GROUP)
    assert report.expiry.cut_ids == () and report.gc is not None and report.gc.deleted
    for table in ("accounts", "totals", "events"):
        assert files_on_disk(catalog, table) == needed_files(catalog, ledger, table), table
    attempts = Path(path_of(warehouse_of(catalog))) / "_streambed" / "bank" / "_attempts"
    assert list(attempts.glob("*.json")) == []  # the killed expiry's attempt was swept
    for cut in CutReader(catalog, "bank").list():
        check_cut(cut)


def test_a_pin_during_a_publish_is_kept_and_the_publish_plans_again(catalog: SqlCatalog, ledger: Ledger) -> None:
    for k in range(1, 4):
        publish_run(catalog, ledger, GROUP, k)
    planned = []
    planner = publish_expiry(ledger, GROUP)
    assert planner is not None

    def plan_then_pin(tables: Collection[str]) -> ExpiryPlan:
        plan = planner(tables)
        if not planned:  # a user pins the cut this publish is about to expire
            ledger.pin_cut("bank", plan.cut_ids[0])
        planned.append(plan.cut_ids)
        return plan

    assert publish_run(catalog, ledger, GROUP, 4, expire=plan_then_pin).cut_id == 4
    assert planned == [(1,), ()]
    assert [(cut.cut_id, cut.pinned_at is not None) for cut in ledger.list_cuts("bank")] == [
        (1, True), (2, False), (3, False), (4, False)]
    for cut in CutReader(catalog, "bank").list():
        check_cut(cut)


def test_a_publish_that_died_before_forgetting_its_attempt_loses_no_file(
    catalog: SqlCatalog, ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    publish_run(catalog, ledger, GROUP, 1)
    with monkeypatch.context() as patched:  # cut 2 commits; its process "dies" before removing the record
        patched.setattr(Attempt, "forget", lambda self, warehouse: None)
        publish_run(catalog, ledger, GROUP, 2)
    for k in range(3, 6):  # later commits move the pointers on; sweeps and collections run after each
        publish_run(catalog, ledger, GROUP, k)
    assert [cut.cut_id for cut in ledger.list_cuts("bank")] == [3, 4, 5]
    for cut in CutReader(catalog, "bank").list():
        check_cut(cut)
    for table in ("accounts", "totals", "events"):
        assert files_on_disk(catalog, table) == needed_files(catalog, ledger, table), table


def test_a_table_dropped_from_the_catalog_keeps_the_files_its_kept_cuts_read(
    catalog: SqlCatalog, ledger: Ledger
) -> None:
    for k in range(1, 4):
        publish_run(catalog, ledger, GROUP, k)
    before = files_on_disk(catalog, "totals")
    catalog.drop_table(("ns", "totals"))  # not purged: the files stay, the catalog forgets the table
    report = collect_garbage(catalog, ledger, "bank", dt.timedelta(0))
    assert not any("/totals/" in path for path in report.deleted)
    assert all(Path(path).exists() for path in before)
    assert CutReader(catalog, "bank").get(3).to_arrow("totals").column("version").to_pylist() == [1]


def test_a_run_whose_cut_expired_still_counts_as_published(catalog: SqlCatalog, ledger: Ledger) -> None:
    for k in range(1, 5):
        publish_run(catalog, ledger, GROUP, k)
    expired = ledger.cut_for_run("bank", "r1")
    assert expired is not None and expired.cut_id == 1 and expired.expired_at is not None and expired.members == {}
    again = publish_cut(catalog, ledger, GROUP, "r1", {})  # a cleared publish task of run r1
    assert (again.cut_id, again.watermark) == (1, Lsn(100))
    assert [cut.cut_id for cut in ledger.list_cuts("bank")] == [2, 3, 4]


def test_a_kept_cut_whose_snapshot_another_writer_expired_keeps_its_files(
    catalog: SqlCatalog, ledger: Ledger
) -> None:
    for k in range(1, 4):
        publish_run(catalog, ledger, GROUP, k)
    table = catalog.load_table(("ns", "accounts"))
    snapshot = ledger.get_cut("bank", 1).members["accounts"].snapshot_id
    table.manage_snapshots().remove_tag(cut_tag("bank", 1)).commit()
    table.maintenance.expire_snapshots().by_id(snapshot).commit()
    assert catalog.load_table(("ns", "accounts")).snapshot_by_id(snapshot) is None
    collect_garbage(catalog, ledger, "bank", dt.timedelta(0))
    check_cut(CutReader(catalog, "bank").get(1))  # read through cut 1's own metadata file
