"""Nessie as a group's REST catalog: each cut is one Nessie commit, so every state its branch ever had
holds whole cuts (atomic and isolated, where SeaweedFS is atomic only); the capability check takes
the probe path (Nessie 0.99's ``/v1/config`` lists no endpoints); the S3 secret stays off the
command line. The tests of the other REST files run on Nessie too (``rest_properties``)."""

from __future__ import annotations

from pathlib import Path

import pytest
import requests
from pyiceberg.catalog import load_catalog
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.exceptions import NoSuchTableError

from airflow_provider_streambed.catalog import open_catalog, open_with_ledger, staging_of
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.publish import check_capability, publish_cut
from airflow_provider_streambed.publish import rest as rest_module
from airflow_provider_streambed.publish.iceberg.rest import supported_endpoints
from airflow_provider_streambed.publish.reconcile import CutMark
from airflow_provider_streambed.publish.rest import TRANSACTIONS_ENDPOINT, supports_transactions
from airflow_provider_streambed.read import CutReader
from airflow_provider_streambed.testing.nessie import S3_SECRET, ThrowawayNessie
from tests.integration.publish.helpers import bank_tables, make_group, pin_and_stage

pytestmark = [pytest.mark.slow, pytest.mark.cluster]

MEMBERS = ("accounts", "totals")


@pytest.fixture
def branch(nessie: ThrowawayNessie, request: pytest.FixtureRequest) -> str:
    """A branch of the test's own on the module's Nessie."""
    return nessie.create_branch(request.node.name)


def marks_at(nessie: ThrowawayNessie, branch: str, commit: str) -> dict[str, int | None]:
    """Per member table that exists at ``commit`` of ``branch``, the cut its metadata is marked with."""
    at_commit = {**nessie.catalog_properties(branch), "uri": nessie.catalog_uri(f"{branch}@{commit}")}
    reader = load_catalog("reader", **at_commit)
    marks: dict[str, int | None] = {}
    for name in MEMBERS:
        try:
            mark = CutMark.of(reader.load_table(("ns", name)))
        except NoSuchTableError:
            continue
        marks[name] = None if mark is None else mark.cut_id
    return marks


def test_every_state_of_the_branch_holds_whole_cuts(nessie: ThrowawayNessie, branch: str) -> None:
    properties = nessie.catalog_properties(branch)
    catalog, ledger = open_with_ledger(properties)
    group = make_group()
    for number in range(1, 4):
        manifests = pin_and_stage(ledger, staging_of(catalog), "bank", f"run{number}", Lsn(100 * number),
                                  bank_tables(number))
        assert publish_cut(catalog, ledger, group, f"run{number}", manifests).cut_id == number
    commits = nessie.history(branch)
    tables = {f"ns.{name}" for name in MEMBERS}
    changed = [{".".join(op["key"]["elements"]) for op in entry.get("operations") or []} for entry in commits]
    assert changed[:3] == [tables] * 3  # each cut: one Nessie commit that changes every member
    assert all(len(keys) == 1 for keys in changed[3:])  # before them: the namespace and each table created
    seen = set()
    for entry in commits:  # a reader at any commit of the branch: every member at one cut, or none at any
        marks = marks_at(nessie, branch, entry["commitMeta"]["hash"])
        cuts = set(marks.values())
        assert cuts <= {None} or (len(cuts) == 1 and set(marks) == set(MEMBERS)), marks
        seen |= cuts
    assert seen - {None} == {1, 2, 3}
    reader = CutReader(properties, "bank")  # cuts read through the ledger; the tables keep no tags to verify
    assert [cut.to_arrow("accounts").column("version").to_pylist() for cut in reader.list()] == [[1] * 5, [2] * 5,
                                                                                                  [3] * 5]
    assert any("tag bank-cut-3" in problem for problem in reader.get(3).verify())


def test_nessie_lists_no_endpoints_and_the_probe_finds_the_group_commit(nessie: ThrowawayNessie, branch: str) -> None:
    catalog = open_catalog(nessie.catalog_properties(branch))
    assert isinstance(catalog, RestCatalog)
    config = requests.get(f"{nessie.catalog_uri(branch)}/v1/config", params={"warehouse": nessie.warehouse},
                          timeout=10).json()
    assert "endpoints" not in config and config["overrides"]["nessie.is-nessie-catalog"] == "true"
    assert TRANSACTIONS_ENDPOINT not in supported_endpoints(catalog)  # pyiceberg's defaults: probed
    probe = rest_module._post_commit(catalog, [])
    assert probe.status_code == rest_module.INVALID and "Invalid table changes: empty" in probe.text
    assert supports_transactions(catalog) and check_capability(catalog, make_group())


def test_the_s3_secret_is_neither_on_the_command_line_nor_in_the_settings(nessie: ThrowawayNessie) -> None:
    command = Path(f"/proc/{nessie.pid}/cmdline").read_bytes()
    settings = (nessie.root / "config" / "application.properties").read_text(encoding="utf-8")
    assert nessie.s3.secret_key.encode() not in command and nessie.s3.secret_key not in settings
    assert f"access-key=urn:nessie-secret:quarkus:{S3_SECRET}\n" in settings
    assert nessie.s3.secret_key not in nessie.server_log()
