"""Publishing cuts on a real SQL catalog (SQLite and PostgreSQL): contents, idempotency, concurrency, conflicts."""

from __future__ import annotations

import dataclasses
import os
import threading
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.manifest import ManifestFile, ManifestWriter

from airflow_provider_streambed.catalog import open_catalog, warehouse_of
from airflow_provider_streambed.exceptions import (
    DamagedOutputError,
    InvalidWatermarkError,
    OutputSchemaError,
    PublishConflictError,
    PublishError,
    RunSupersededError,
    StaleOutputError,
)
from airflow_provider_streambed.ledger import CutRecord, Ledger, RunState
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.publish import cut as cut_module
from airflow_provider_streambed.publish import publish_cut
from airflow_provider_streambed.publish import sql as sql_module
from airflow_provider_streambed.read import CutReader
from airflow_provider_streambed.staging import MemberManifest, group_staging_dir, read_member_manifest, staging_root
from airflow_provider_streambed.staging.members import file_sizes
from tests.integration.publish.helpers import bank_tables, make_group, pin_and_stage, stage, stage_delta

pytestmark = pytest.mark.slow


def _local(uri: str) -> Path:
    return Path(uri.removeprefix("file://"))


def _metadata_files(catalog: SqlCatalog, table: str) -> set[str]:
    return {p.name for p in (_local(warehouse_of(catalog)) / "ns" / table / "metadata").iterdir()}


def _cut_1_and_run_2(catalog: SqlCatalog, ledger: Ledger) -> tuple[CutRecord, dict[str, MemberManifest]]:
    """The bank group's cut 1 published by run ``run1``, and run ``run2`` pinned at W=0/7D0 and staged."""
    warehouse = warehouse_of(catalog)
    first = publish_cut(catalog, ledger, make_group(), "run1",
                        pin_and_stage(ledger, warehouse, "bank", "run1", Lsn(1000), bank_tables(1)))
    return first, pin_and_stage(ledger, warehouse, "bank", "run2", Lsn(2000), bank_tables(2))


def _assert_no_orphaned_metadata(catalog: SqlCatalog, table: str) -> None:
    """Every metadata JSON of ``ns.<table>`` is its current one or in its log: no losing attempt's was left."""
    loaded = catalog.load_table(f"ns.{table}")
    known = {e.metadata_file.rsplit("/", 1)[1] for e in loaded.metadata.metadata_log}
    known.add(loaded.metadata_location.rsplit("/", 1)[1])
    assert {f for f in _metadata_files(catalog, table) if f.endswith(".metadata.json")} == known


def test_cuts_replace_contents_with_one_tagged_overwrite_snapshot(catalog: SqlCatalog, ledger: Ledger) -> None:
    group, warehouse = make_group(), warehouse_of(catalog)
    for version in (1, 2):
        manifests = pin_and_stage(ledger, warehouse, "bank", f"run{version}", Lsn(1000 * version), bank_tables(version))
        record = publish_cut(catalog, ledger, group, f"run{version}", manifests)
        assert (record.cut_id, record.watermark) == (version, Lsn(1000 * version))
    accounts = catalog.load_table("ns.accounts")
    snapshots = accounts.snapshots()
    assert len(snapshots) == 2 and snapshots[1].parent_snapshot_id == snapshots[0].snapshot_id
    current = accounts.current_snapshot()
    assert current is not None and current.summary is not None
    assert current.summary.operation.value == "overwrite"
    assert {k: current.summary[k] for k in ("streambed.group", "streambed.cut-id", "streambed.watermark-lsn",
                                             "streambed.run-key")} == {
        "streambed.group": "bank", "streambed.cut-id": "2", "streambed.watermark-lsn": str(Lsn(2000)),
        "streambed.run-key": "run2"}
    assert accounts.refs()["bank-cut-2"].snapshot_id == current.snapshot_id
    assert accounts.refs()["bank-cut-1"].snapshot_id == snapshots[0].snapshot_id
    assert "schema.name-mapping.default" in accounts.properties
    expected = bank_tables(2)["accounts"]
    assert accounts.scan().to_arrow().sort_by("id").equals(expected.cast(accounts.scan().to_arrow().schema))
    assert ledger.get_run("bank", "run2").state == RunState.PUBLISHED  # type: ignore[union-attr]
    # staging of published runs is gone; data lives in the table, per run
    assert not _local(staging_root(warehouse, "bank", "run2")).exists()
    assert {p.name for p in (_local(warehouse) / "ns" / "accounts" / "data").iterdir()} == {"run1", "run2"}


def test_republishing_a_run_returns_its_cut_and_changes_nothing(catalog: SqlCatalog, ledger: Ledger) -> None:
    group, warehouse = make_group(), warehouse_of(catalog)
    manifests = pin_and_stage(ledger, warehouse, "bank", "run1", Lsn(1000), bank_tables(1))
    first = publish_cut(catalog, ledger, group, "run1", manifests)
    location = catalog.load_table("ns.totals").metadata_location
    again = publish_cut(catalog, ledger, group, "run1", manifests)
    assert again == first
    assert catalog.load_table("ns.totals").metadata_location == location
    assert len(ledger.list_cuts("bank")) == 1


def test_two_concurrent_publishes_of_one_run_make_one_cut(catalog_props: dict[str, str], catalog: SqlCatalog,
                                                         ledger: Ledger) -> None:
    group = make_group()
    _, manifests = _cut_1_and_run_2(catalog, ledger)
    barrier, results, errors = threading.Barrier(2), [], []

    def publisher() -> None:
        own_catalog = open_catalog(catalog_props)
        assert isinstance(own_catalog, SqlCatalog)
        barrier.wait()
        try:
            results.append(publish_cut(own_catalog, Ledger(own_catalog.engine), group, "run2", manifests))
        except Exception as error:  # collected for the assertion below
            errors.append(error)

    threads = [threading.Thread(target=publisher) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == [] and len(results) == 2
    assert results[0].cut_id == results[1].cut_id == 2
    assert results[0].members == results[1].members
    assert [c.cut_id for c in ledger.list_cuts("bank")] == [1, 2]
    for table in ("accounts", "totals"):
        loaded = catalog.load_table(f"ns.{table}")
        assert len(loaded.snapshots()) == 2
        assert loaded.metadata_location == results[0].members[table].metadata_location
        assert _metadata_files(catalog, table) >= {loaded.metadata_location.rsplit("/", 1)[1]}
    _assert_no_orphaned_metadata(catalog, "accounts")  # the loser's metadata files were deleted


def test_a_publisher_whose_files_a_winner_swept_mid_build_returns_the_winners_cut(
    catalog_props: dict[str, str], catalog: SqlCatalog, ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The window CI once hit: the winner commits the run's cut and sweeps the loser's attempt (dead:
    # its base pointers moved) between the loser's manifest write and pyiceberg reading its length.
    group = make_group()
    _, manifests = _cut_1_and_run_2(catalog, ledger)
    winner: list[object] = []
    real_to_manifest_file = ManifestWriter.to_manifest_file

    def winner_in_the_window(writer: ManifestWriter) -> ManifestFile:
        if not winner:
            winner.append(None)  # the winner's own manifests pass straight through
            own = open_catalog(catalog_props)
            assert isinstance(own, SqlCatalog)
            winner[0] = publish_cut(own, Ledger(own.engine), group, "run2", manifests)
        return real_to_manifest_file(writer)

    monkeypatch.setattr(ManifestWriter, "to_manifest_file", winner_in_the_window)
    loser = publish_cut(catalog, ledger, group, "run2", manifests)
    assert loser == winner[0] and loser.cut_id == 2
    assert [c.cut_id for c in ledger.list_cuts("bank")] == [1, 2]
    for table in ("accounts", "totals"):  # the loser's files are gone, the winner's are the tables'
        assert catalog.load_table(f"ns.{table}").metadata_location == loser.members[table].metadata_location
        _assert_no_orphaned_metadata(catalog, table)


def test_a_publisher_that_finds_its_run_recorded_inside_its_commit_returns_that_cut_and_deletes_its_files(
    catalog_props: dict[str, str], catalog: SqlCatalog, ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    group = make_group()
    _, manifests = _cut_1_and_run_2(catalog, ledger)
    real_commit, winner = sql_module.commit_group, list[CutRecord]()

    def winner_first(*args: object, **kwargs: object) -> object:
        # a concurrent publisher of the run commits after this one built its metadata, before its commit;
        # the winner's sweep of dead attempts, after its commit, has not run yet
        own = open_catalog(catalog_props)
        assert isinstance(own, SqlCatalog)
        with monkeypatch.context() as patched:
            patched.setattr(sql_module, "commit_group", real_commit)
            patched.setattr(cut_module, "sweep_attempts", lambda *args: 0)
            winner.append(publish_cut(own, Ledger(own.engine), group, "run2", manifests))
        return real_commit(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(sql_module, "commit_group", winner_first)
    loser = publish_cut(catalog, ledger, group, "run2", manifests)
    assert loser == winner[0] and loser.cut_id == 2
    assert [c.cut_id for c in ledger.list_cuts("bank")] == [1, 2]
    for table in ("accounts", "totals"):  # the loser deleted its own files; the winner's are the tables'
        assert catalog.load_table(f"ns.{table}").metadata_location == loser.members[table].metadata_location
        _assert_no_orphaned_metadata(catalog, table)


def test_a_member_changed_by_another_writer_refuses_the_whole_publish(catalog: SqlCatalog, ledger: Ledger) -> None:
    group = make_group()
    _, manifests = _cut_1_and_run_2(catalog, ledger)
    before = {t: catalog.load_table(f"ns.{t}").metadata_location for t in ("accounts", "totals")}
    catalog.load_table("ns.totals").append(pa.table({"total": pa.array([1], pa.int64()),
                                                     "version": pa.array([9], pa.int64())}))
    with pytest.raises(PublishConflictError, match=r"member 'totals': table ns.totals .*another writer"):
        publish_cut(catalog, ledger, group, "run2", manifests)
    assert catalog.load_table("ns.accounts").metadata_location == before["accounts"]
    assert ledger.cut_for_run("bank", "run2") is None and len(ledger.list_cuts("bank")) == 1


@pytest.mark.parametrize(("raced", "other"), [("accounts", "totals"), ("totals", "accounts")])
def test_a_writer_racing_the_build_is_caught_by_compare_and_swap(
    catalog: SqlCatalog, ledger: Ledger, monkeypatch: pytest.MonkeyPatch, raced: str, other: str
) -> None:
    group = make_group()
    _, manifests = _cut_1_and_run_2(catalog, ledger)
    before = catalog.load_table(f"ns.{other}").metadata_location
    real_commit = sql_module.commit_group

    def racing_commit(*args: object, **kwargs: object) -> object:
        # another writer commits to the raced table after this cut read it, before the pointer swap
        catalog.load_table(f"ns.{raced}").append(bank_tables(7)[raced])
        return real_commit(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(sql_module, "commit_group", racing_commit)
    metadata_before = _metadata_files(catalog, other)
    with pytest.raises(PublishConflictError, match=rf"member '{raced}': table ns.{raced} was changed by another"):
        publish_cut(catalog, ledger, group, "run2", manifests)
    assert catalog.load_table(f"ns.{other}").metadata_location == before
    assert _metadata_files(catalog, other) == metadata_before  # the attempt's files were deleted
    assert ledger.cut_for_run("bank", "run2") is None


def test_manifests_must_cover_every_member_at_one_watermark(catalog: SqlCatalog, ledger: Ledger) -> None:
    group, warehouse = make_group(), warehouse_of(catalog)
    manifests = pin_and_stage(ledger, warehouse, "bank", "run1", Lsn(1000), bank_tables(1))
    with pytest.raises(PublishError, match=r"no staged output for members \['totals'\]"):
        publish_cut(catalog, ledger, group, "run1", {"accounts": manifests["accounts"]})
    older = pin_and_stage(ledger, warehouse, "bank", "run0", Lsn(500), bank_tables(2))
    publish_cut(catalog, ledger, group, "run1", manifests)
    with pytest.raises(RunSupersededError, match=r"run 'run0' \(W=0/1F4\) was superseded by run run1"):
        publish_cut(catalog, ledger, group, "run0", older)
    late = pin_and_stage(ledger, warehouse, "bank", "late", Lsn(900), bank_tables(2))
    with pytest.raises(InvalidWatermarkError, match=r"run 'late': W=0/384 is not after cut 1's W=0/3E8"):
        publish_cut(catalog, ledger, group, "late", late)
    mixed = {**pin_and_stage(ledger, warehouse, "bank", "run2", Lsn(2000), bank_tables(2)),
             "totals": late["totals"]}
    with pytest.raises(PublishError, match=r"members were staged at different W"):
        publish_cut(catalog, ledger, group, "run2", mixed)


def test_per_table_atomicity_commits_through_pyiceberg_and_records_the_cut(
    sqlite_props: dict[str, str]
) -> None:
    catalog = open_catalog(sqlite_props)
    ledger = Ledger(sqlite_props["uri"])
    ledger.create()
    group = make_group(atomicity="per_table")
    for version in (1, 2):
        manifests = pin_and_stage(ledger, sqlite_props["warehouse"], "bank", f"r{version}", Lsn(1000 * version),
                                  bank_tables(version))
        record = publish_cut(catalog, ledger, group, f"r{version}", manifests)
        totals = catalog.load_table("ns.totals")
        assert record.members["totals"].metadata_location == totals.metadata_location
        assert totals.refs()[f"bank-cut-{version}"].snapshot_id == record.members["totals"].snapshot_id
    assert totals.scan().to_arrow().column("version").to_pylist() == [2]
    assert not _local(group_staging_dir(sqlite_props["warehouse"], "bank") + "/r2").exists()


def test_an_output_that_changes_a_column_type_is_refused_and_computed_again(
    catalog: SqlCatalog, ledger: Ledger
) -> None:
    group, warehouse = make_group(), warehouse_of(catalog)
    publish_cut(catalog, ledger, group, "run1", pin_and_stage(ledger, warehouse, "bank", "run1", Lsn(100),
                                                             bank_tables(1)))
    tables = bank_tables(2)
    tables["totals"] = pa.table({"total": pa.array(["lots"]), "version": pa.array([2], pa.int64())})  # a bug
    manifests = pin_and_stage(ledger, warehouse, "bank", "run2", Lsn(200), tables)
    with pytest.raises(OutputSchemaError, match=r"member 'totals': its output does not fit table ns.totals: "
                                                r"total int64 -> string \(Iceberg only widens"):
        publish_cut(catalog, ledger, group, "run2", manifests)
    assert len(ledger.list_cuts("bank")) == 1
    root = staging_root(warehouse, "bank", "run2")
    assert read_member_manifest(root, "totals") is None  # discarded: the refresh computes it again
    assert read_member_manifest(root, "accounts") is not None

    fixed = stage(warehouse, "bank", "run2", Lsn(200), {"totals": bank_tables(2)["totals"]})
    assert publish_cut(catalog, ledger, group, "run2", {**manifests, **fixed}).cut_id == 2
    balances = bank_tables(2)["accounts"]["balance"].to_pylist()
    assert catalog.load_table("ns.totals").scan().to_arrow()["total"].to_pylist() == [sum(balances)]


def test_a_truncated_staged_file_is_refused_before_anything_moves(catalog: SqlCatalog, ledger: Ledger) -> None:
    group, warehouse = make_group(), warehouse_of(catalog)
    publish_cut(catalog, ledger, group, "run1", pin_and_stage(ledger, warehouse, "bank", "run1", Lsn(100),
                                                             bank_tables(1)))
    manifests = pin_and_stage(ledger, warehouse, "bank", "run2", Lsn(200), bank_tables(2))
    manifests = {name: dataclasses.replace(manifest, sizes=file_sizes(manifest.files))
                 for name, manifest in manifests.items()}
    truncated = Path(manifests["totals"].files[0].removeprefix("file://"))
    os.truncate(truncated, truncated.stat().st_size - 1)
    with pytest.raises(DamagedOutputError, match=r"member 'totals': staged file .* has \d+ bytes, not the \d+ staged "
                                                 r".*staged output was discarded: run the refresh step again"):
        publish_cut(catalog, ledger, group, "run2", manifests)
    root = staging_root(warehouse, "bank", "run2")
    assert read_member_manifest(root, "totals") is None and len(ledger.list_cuts("bank")) == 1
    assert all(Path(uri.removeprefix("file://")).exists() for uri in manifests["accounts"].files)  # nothing moved


def test_a_first_cut_whose_files_moved_before_a_crash_publishes_on_retry(
    catalog: SqlCatalog, ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    group, warehouse = make_group(), warehouse_of(catalog)
    manifests = pin_and_stage(ledger, warehouse, "bank", "run1", Lsn(100), bank_tables(1))

    def crash(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the publisher died after moving the staged files")

    monkeypatch.setattr(sql_module, "build_member", crash)
    with pytest.raises(RuntimeError, match="died after moving"):
        publish_cut(catalog, ledger, group, "run1", manifests)
    monkeypatch.undo()
    assert not any(Path(uri.removeprefix("file://")).exists() for m in manifests.values() for uri in m.files)
    record = publish_cut(catalog, ledger, group, "run1", manifests)  # the new tables take the moved files' schema
    assert record.cut_id == 1
    assert catalog.load_table("ns.totals").scan().to_arrow()["total"].to_pylist() == \
        bank_tables(1)["totals"]["total"].to_pylist()


def test_a_failed_move_is_retried_not_taken_for_a_lost_file(
    catalog: SqlCatalog, ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_provider_streambed import storage

    group, warehouse = make_group(), warehouse_of(catalog)
    manifests = pin_and_stage(ledger, warehouse, "bank", "run1", Lsn(1000), bank_tables(1))
    real_transfer, calls = storage.transfer, []

    def failing_transfer(*args: object) -> None:
        calls.append(args)
        if len(calls) == 2:  # the store fails once, mid-publish, after one file moved
            raise OSError("503 Slow Down")
        real_transfer(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(storage, "transfer", failing_transfer)
    with pytest.raises(OSError, match="503 Slow Down"):  # retryable, not UnpublishableRunError
        publish_cut(catalog, ledger, group, "run1", manifests)
    assert ledger.cut_for_run("bank", "run1") is None
    assert publish_cut(catalog, ledger, group, "run1", manifests).cut_id == 1  # the retry moves the rest


def test_an_incremental_output_on_another_snapshot_is_discarded_not_published(
    catalog: SqlCatalog, ledger: Ledger
) -> None:
    group, warehouse = make_group(), warehouse_of(catalog)
    first, manifests = _cut_1_and_run_2(catalog, ledger)
    base = first.members["accounts"].snapshot_id
    added = bank_tables(2)["accounts"].slice(0, 1)
    stale = stage_delta(warehouse, "bank", "run2", Lsn(2000), "accounts", added, [], base_snapshot_id=base + 1)
    with pytest.raises(StaleOutputError, match=rf"member 'accounts': its output changes snapshot {base + 1} of "
                                               rf"table ns.accounts, which is at snapshot {base}.*discarded"):
        publish_cut(catalog, ledger, group, "run2", {**manifests, "accounts": stale})
    assert ledger.cut_for_run("bank", "run2") is None
    assert read_member_manifest(staging_root(warehouse, "bank", "run2"), "accounts") is None  # computed again
    fitting = stage_delta(warehouse, "bank", "run2", Lsn(2000), "accounts", added, [], base_snapshot_id=base)
    assert publish_cut(catalog, ledger, group, "run2", {**manifests, "accounts": fitting}).cut_id == 2


def test_a_resynced_mirror_replaces_a_column_whose_type_changed(catalog: SqlCatalog, ledger: Ledger) -> None:
    group, warehouse = make_group(), warehouse_of(catalog)
    publish_cut(catalog, ledger, group, "run1", pin_and_stage(ledger, warehouse, "bank", "run1", Lsn(100),
                                                             bank_tables(1)))
    tables = bank_tables(2)
    balance = tables["accounts"].schema.get_field_index("balance")
    as_text = pa.array([str(value) for value in tables["accounts"]["balance"].to_pylist()], pa.string())
    tables["accounts"] = tables["accounts"].set_column(balance, "balance", as_text)  # ALTER TYPE text, resynced
    manifests = pin_and_stage(ledger, warehouse, "bank", "run2", Lsn(200), tables)
    manifests["accounts"] = dataclasses.replace(manifests["accounts"], resynced="columns changed type: balance")
    record = publish_cut(catalog, ledger, group, "run2", manifests)
    table = catalog.load_table("ns.accounts")
    assert table.schema().as_arrow().names == ["id", "balance", "version", "updated_at"]  # the source's order
    assert table.scan().to_arrow()["balance"].to_pylist() == as_text.to_pylist()
    snapshot = table.snapshot_by_id(record.members["accounts"].snapshot_id)
    assert snapshot is not None and snapshot.summary["streambed.resync-reason"] == "columns changed type: balance"
    older = CutReader(catalog, "bank").get(1).to_arrow("accounts")
    assert older["balance"].type == pa.int64()  # the older cut reads the column it had
