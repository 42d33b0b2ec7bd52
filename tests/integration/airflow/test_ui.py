"""The Streambed page under Airflow's own api-server app (``create_app``) and auth manager: only a
logged-in user sees it; it lists the groups, then a group's cuts, pins and freshness plot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from airflow_provider_streambed.catalog import ledger_of, open_catalog
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.publish import publish_cut
from tests.integration.publish.helpers import bank_tables, make_group, pin_and_stage

pytestmark = pytest.mark.slow


@pytest.fixture
def api_client(airflow_db: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> TestClient:
    """Airflow's API app with one viewer, ``alice``, whose password is known."""
    from airflow.api_fastapi.app import create_app, purge_cached_app

    passwords = tmp_path / "passwords.json"
    passwords.write_text(json.dumps({"alice": "alice-pw"}))
    monkeypatch.setenv("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS", "alice:viewer")
    monkeypatch.setenv("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE", str(passwords))
    monkeypatch.setenv("AIRFLOW__API_AUTH__JWT_SECRET", "streambed-tests-" * 5)
    monkeypatch.setenv("AIRFLOW__STREAMBED__CATALOG_CONN_IDS", "lakehouse")
    purge_cached_app()
    return TestClient(create_app())


def test_a_logged_in_user_sees_the_groups_and_their_cuts(
    bank_connections: dict[str, str], api_client: TestClient
) -> None:
    catalog = open_catalog(bank_connections)
    ledger = ledger_of(catalog)
    ledger.create()
    group, warehouse = make_group(), bank_connections["warehouse"]
    for number in (1, 2):
        run_key = f"run{number}"
        manifests = pin_and_stage(ledger, warehouse, "bank", run_key, Lsn(100 * number), bank_tables(number))
        publish_cut(catalog, ledger, group, run_key, manifests)
    ledger.pin_cut("bank", 1)

    with api_client as client:
        assert client.get("/streambed/").status_code == 401  # not logged in
        login = client.post("/auth/token", json={"username": "alice", "password": "alice-pw"})
        assert login.status_code == 201
        client.cookies.set("_token", login.json()["access_token"])

        index = client.get("/streambed/")
        assert index.status_code == 200
        assert "href='groups/lakehouse/bank'" in index.text and "<td class='num'>2</td>" in index.text

        page = client.get("/streambed/groups/lakehouse/bank", params={"cut": 2})
        assert page.status_code == 200
        assert "<svg id='freshness'" in page.text and "<polyline" in page.text
        assert "<tr id='cut-2' class='highlight'>" in page.text
        first = page.text.split("<tr id='cut-1'>", 1)[1].split("</tr>", 1)[0]
        assert "<td class='num'>5</td><td class='num'>1</td><td class='pinned'>pinned</td>" in first
        assert str(ledger.get_cut("bank", 2).watermark) in page.text
        assert client.get("/streambed/groups/lakehouse/nothing").status_code == 404
        assert client.get("/streambed/groups/other_catalog/bank").status_code == 404
