"""Cuts through a real Iceberg REST catalog (SeaweedFS, and Nessie: ``rest_properties``) with the
warehouse on S3: one multi-table commit per cut, a concurrent writer refused whole, the catalog
killed mid-publish (SeaweedFS), and a ledger write lost after the commit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest
import requests
from pyiceberg.catalog import Catalog, load_catalog

from airflow_provider_streambed.catalog import ledger_of, open_catalog, staging_of
from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.exceptions import (
    CatalogUnavailableError,
    PublishConflictError,
    UnpublishableRunError,
)
from airflow_provider_streambed.ledger import Ledger, RunState, cut_tag
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.publish import publish_cut
from airflow_provider_streambed.publish import reconcile as reconcile_module
from airflow_provider_streambed.publish import rest as rest_module
from airflow_provider_streambed.publish.reconcile import reconcile_before_run
from airflow_provider_streambed.read import CutReader
from airflow_provider_streambed.snapshot_properties import CUT_ID_PROPERTY, RUN_KEY_PROPERTY
from airflow_provider_streambed.staging import MemberManifest
from airflow_provider_streambed.testing.nessie import ThrowawayNessie
from airflow_provider_streambed.testing.seaweed import ThrowawaySeaweed
from airflow_provider_streambed.testing.spark import local_spark_session
from tests.integration.publish.helpers import bank_tables, make_group, pin_and_stage

pytestmark = pytest.mark.slow

MEMBERS = ("accounts", "totals")


@pytest.fixture
def properties(rest_properties: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """The REST catalog's properties, with the ledger in an SQLite file and staging on a local disk."""
    return {**rest_properties, "streambed.ledger-uri": f"sqlite:///{tmp_path / 'ledger.db'}",
            "streambed.staging-uri": (tmp_path / "staging").as_uri()}


@pytest.fixture
def catalog(properties: dict[str, str]) -> Catalog:
    return open_catalog(properties)


@pytest.fixture
def ledger(catalog: Catalog) -> Ledger:
    ledger = ledger_of(catalog)
    ledger.create()
    return ledger


def stage_run(catalog: Catalog, ledger: Ledger, number: int) -> dict[str, MemberManifest]:
    """Pin run ``run<number>`` at W = 100 * number and stage bank version ``number``."""
    return pin_and_stage(ledger, staging_of(catalog), "bank", f"run{number}", Lsn(100 * number), bank_tables(number))


def current_cut(client: Catalog) -> dict[str, Any]:
    """Per member, the cut id of the current snapshot as a fresh client sees it, and the rows."""
    seen = {}
    for name in MEMBERS:
        table = client.load_table(("ns", name))
        snapshot = table.current_snapshot()
        assert snapshot is not None
        seen[name] = (snapshot.summary[CUT_ID_PROPERTY], table.scan(snapshot_id=snapshot.snapshot_id).to_arrow())
    return seen


def roll_back(request: pytest.FixtureRequest, rest_server: str, rest_properties: dict[str, str], name: str,
              snapshot_id: int) -> None:
    """Undo another writer's last commit, to member ``name``: the table rolled back to ``snapshot_id``
    (SeaweedFS); the test's branch moved back one commit (Nessie keeps only a table's current snapshot)."""
    if rest_server == "nessie":
        nessie: ThrowawayNessie = request.getfixturevalue("nessie")
        branch = rest_properties["uri"].rsplit("/", 1)[1]
        nessie.assign_branch(branch, nessie.history(branch)[1]["commitMeta"]["hash"])
        return
    table = load_catalog("repair", **rest_properties).load_table(("ns", name))
    table.manage_snapshots().set_current_snapshot(snapshot_id).commit()


def test_every_cut_is_one_multi_table_commit_on_s3(catalog: Catalog, ledger: Ledger, properties: dict[str, str],
                                                   rest_properties: dict[str, str], rest_server: str,
                                                   tmp_path: Path) -> None:
    group = make_group()
    for number in range(1, 6):
        record = publish_cut(catalog, ledger, group, f"run{number}", stage_run(catalog, ledger, number))
        assert record.cut_id == number and record.watermark == Lsn(100 * number)
        seen = current_cut(load_catalog("reader", **rest_properties))  # any other REST client
        assert {cut for cut, _ in seen.values()} == {str(number)}
        accounts, totals = seen["accounts"][1], seen["totals"][1]
        assert totals.column("total").to_pylist() == [sum(accounts.column("balance").to_pylist())]  # the invariant
        for name, member in record.members.items():
            table = catalog.load_table(member.table_identifier)
            if rest_server == "nessie":  # Nessie versions the catalog and drops table tags: cuts read by the ledger
                assert cut_tag("bank", number) not in table.metadata.refs
            else:
                assert table.metadata.refs[cut_tag("bank", number)].snapshot_id == member.snapshot_id
            assert table.location().startswith("s3://") and name in table.location()
            assert member.metadata_location.startswith(f"{table.location()}/metadata/")
            files = table.inspect.files().column("file_path").to_pylist()
            assert files and all(path.startswith(f"{table.location()}/data/run{number}/") for path in files)
    reader = CutReader(properties, "bank")  # the catalog properties alone: the ledger is named in them
    spark = local_spark_session("streambed-rest-reader")
    for number in range(1, 6):  # every cut still reads: pyiceberg, DuckDB (httpfs), Spark (local copies)
        cut = reader.get(number)
        assert cut.to_arrow("accounts").column("version").to_pylist() == [number] * 5
        con = cut.to_duckdb(duckdb.connect())
        (total,) = con.execute("SELECT sum(balance) FROM accounts").fetchone()
        assert con.execute("SELECT total FROM totals").fetchall() == [(total,)]
        frames = cut.to_spark(spark, copies_dir=(tmp_path / "reader").as_uri())
        assert frames["accounts"].agg({"balance": "sum"}).collect()[0][0] == total
    assert not list((Path(staging_of(catalog).removeprefix("file://")) / "bank").glob("run*/*/data/*.parquet"))


def test_a_writer_racing_the_commit_fails_the_whole_cut(
    catalog: Catalog, ledger: Ledger, rest_properties: dict[str, str], rest_server: str,
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    group = make_group()
    first = publish_cut(catalog, ledger, group, "run1", stage_run(catalog, ledger, 1))
    manifests = stage_run(catalog, ledger, 2)
    real_post = rest_module._post_commit

    def racing_post(catalog: Catalog, changes: list[Any]) -> requests.Response:
        if changes:  # not the capability probe: another client commits to `totals` after this cut loaded it
            writer = load_catalog("writer", **rest_properties).load_table(("ns", "totals"))
            writer.append(pa.table({"total": pa.array([1], pa.int64()), "version": pa.array([9], pa.int64())}))
        return real_post(catalog, changes)

    monkeypatch.setattr(rest_module, "_post_commit", racing_post)
    with pytest.raises(PublishConflictError, match=r"changed by another writer .*nothing was published"):
        publish_cut(catalog, ledger, group, "run2", manifests)
    monkeypatch.undo()
    accounts = catalog.load_table("ns.accounts")
    assert accounts.current_snapshot().snapshot_id == first.members["accounts"].snapshot_id  # nothing applied
    assert cut_tag("bank", 2) not in accounts.metadata.refs and ledger.cut_for_run("bank", "run2") is None

    roll_back(request, rest_server, rest_properties, "totals", first.members["totals"].snapshot_id)  # the repair
    record = publish_cut(catalog, ledger, group, "run2", manifests)
    assert record.cut_id == 2 and {cut for cut, _ in current_cut(catalog).values()} == {"2"}


def test_a_run_superseded_while_its_commit_is_in_flight_still_records_its_cut(
    catalog: Catalog, ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `streambed runs supersede` (or the next run) lands after the pinned check, before the commit
    # applies: the catalog holds the cut, so the run published it
    group = make_group()
    publish_cut(catalog, ledger, group, "run1", stage_run(catalog, ledger, 1))
    manifests = stage_run(catalog, ledger, 2)
    real_post = rest_module._post_commit

    def superseded_post(catalog: Catalog, changes: list[Any]) -> requests.Response:
        if changes:
            assert ledger.set_run_state("bank", "run2", RunState.SUPERSEDED)
        return real_post(catalog, changes)

    monkeypatch.setattr(rest_module, "_post_commit", superseded_post)
    record = publish_cut(catalog, ledger, group, "run2", manifests)
    assert record.cut_id == 2 and {cut for cut, _ in current_cut(catalog).values()} == {"2"}
    assert ledger.cut_for_run("bank", "run2") == record
    run = ledger.get_run("bank", "run2")
    assert run is not None and run.state == RunState.PUBLISHED


@pytest.mark.parametrize("rest_server", ["seaweed"])  # Nessie's in-memory store dies with it
@pytest.mark.parametrize("applied", [True, False], ids=["after-the-commit-applied", "before-the-commit"])
def test_the_catalog_killed_mid_publish_then_the_retry_publishes_once(
    catalog: Catalog, ledger: Ledger, seaweed: ThrowawaySeaweed, monkeypatch: pytest.MonkeyPatch, applied: bool
) -> None:
    group = make_group()
    publish_cut(catalog, ledger, group, "run1", stage_run(catalog, ledger, 1))
    manifests = stage_run(catalog, ledger, 2)
    real_post = rest_module._post_commit

    def crash(catalog: Catalog, changes: list[Any]) -> requests.Response:
        if not changes:
            return real_post(catalog, changes)  # the capability probe
        if applied:
            real_post(catalog, changes)  # the server applied the commit, then died before its answer arrived
        seaweed.kill()
        raise requests.ConnectionError("connection reset by peer")

    monkeypatch.setattr(rest_module, "_post_commit", crash)
    with pytest.raises(CatalogUnavailableError, match=r"REST catalog at http://127\.0\.0\.1:\d+"):
        publish_cut(catalog, ledger, group, "run2", manifests)
    monkeypatch.undo()
    assert ledger.cut_for_run("bank", "run2") is None
    seaweed.restart()
    assert catalog.load_table("ns.accounts").current_snapshot().summary[CUT_ID_PROPERTY] == ("2" if applied else "1")
    record = publish_cut(catalog, ledger, group, "run2", manifests)
    assert record.cut_id == 2 and [cut.cut_id for cut in ledger.list_cuts("bank")] == [1, 2]
    assert {cut for cut, _ in current_cut(catalog).values()} == {"2"}
    for name in MEMBERS:
        snapshots = catalog.load_table(("ns", name)).snapshots()
        assert [s.summary[RUN_KEY_PROPERTY] for s in snapshots] == ["run1", "run2"]  # committed exactly once
    assert publish_cut(catalog, ledger, group, "run3", stage_run(catalog, ledger, 3)).cut_id == 3


def commit_without_recording(catalog: Catalog, ledger: Ledger, group: RefreshGroup, number: int,
                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Publish run ``run<number>`` (staged now), the worker dying between the catalog's commit and the ledger write."""
    manifests = stage_run(catalog, ledger, number)

    def crash(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt

    with monkeypatch.context() as patched, pytest.raises(KeyboardInterrupt):
        patched.setattr(rest_module, "record_cut", crash)
        publish_cut(catalog, ledger, group, f"run{number}", manifests)


def test_a_lost_ledger_write_is_recorded_from_the_catalog(
    catalog: Catalog, ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    group = make_group()
    publish_cut(catalog, ledger, group, "run1", stage_run(catalog, ledger, 1))
    commit_without_recording(catalog, ledger, group, 2, monkeypatch)
    assert ledger.cut_for_run("bank", "run2") is None
    assert {cut for cut, _ in current_cut(catalog).values()} == {"2"}  # readers of the tables see cut 2 whole
    stale = stage_run(catalog, ledger, 3)  # a run planned on cut 1, as if its capture had not looked
    with pytest.raises(UnpublishableRunError, match=r"the catalog held cut 2 of run 'run2'.*computed on the cut"):
        publish_cut(catalog, ledger, group, "run3", stale)
    assert ledger.cut_for_run("bank", "run2").cut_id == 2  # recorded on the way
    assert ledger.get_run("bank", "run2").state.value == "published"

    publish_cut(catalog, ledger, group, "run4", stage_run(catalog, ledger, 4))
    commit_without_recording(catalog, ledger, group, 5, monkeypatch)
    assert reconcile_before_run(catalog, ledger, group).run_key == "run5"  # what a run's capture does first
    assert publish_cut(catalog, ledger, group, "run6", stage_run(catalog, ledger, 6)).cut_id == 5
    assert [(cut.cut_id, cut.run_key) for cut in ledger.list_cuts("bank")] == [
        (1, "run1"), (2, "run2"), (3, "run4"), (4, "run5"), (5, "run6")]


def test_two_reconciliations_of_one_cut_both_return_it(
    catalog: Catalog, ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a run's capture reconciles while the lost ledger write's retry records the same cut
    group = make_group()
    publish_cut(catalog, ledger, group, "run1", stage_run(catalog, ledger, 1))
    commit_without_recording(catalog, ledger, group, 2, monkeypatch)
    real_load = reconcile_module.load_members

    def load_then_lose_the_race(*args: Any) -> dict[str, Any]:
        tables = real_load(*args)
        monkeypatch.setattr(reconcile_module, "load_members", real_load)
        assert reconcile_before_run(catalog, ledger, group).run_key == "run2"  # the other process, first
        return tables

    monkeypatch.setattr(reconcile_module, "load_members", load_then_lose_the_race)
    record = reconcile_before_run(catalog, ledger, group)
    assert record is not None and (record.cut_id, record.run_key) == (2, "run2")
    assert [(cut.cut_id, cut.run_key) for cut in ledger.list_cuts("bank")] == [(1, "run1"), (2, "run2")]


def test_per_table_atomicity_commits_each_member_through_the_rest_catalog(catalog: Catalog, ledger: Ledger) -> None:
    group = make_group(atomicity="per_table")
    for number in (1, 2):
        record = publish_cut(catalog, ledger, group, f"run{number}", stage_run(catalog, ledger, number))
        assert record.cut_id == number
        assert {cut for cut, _ in current_cut(catalog).values()} == {str(number)}
