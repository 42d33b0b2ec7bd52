"""The Streambed page under Airflow's own api-server and auth manager: only a logged-in user sees
it; it lists the groups, then a group's last capture, cuts, pins and freshness plot. Once through
the app in-process, once in headless Chromium against a real ``airflow api-server``."""

from __future__ import annotations

import io
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from airflow_provider_streambed.catalog import ledger_of, open_catalog
from airflow_provider_streambed.ledger import Ledger
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.publish import publish_cut
from airflow_provider_streambed.testing.airflow import components, wait_until_healthy
from airflow_provider_streambed.testing.postgres import free_port
from tests.integration.airflow.browser import ARTIFACTS, chromium, log_in
from tests.integration.publish.helpers import bank_tables, make_group, pin_and_stage

pytestmark = pytest.mark.slow

USER, PASSWORD = "alice", "alice-pw"


@pytest.fixture
def viewer(airflow_db: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Airflow's simple auth manager with one viewer, ``alice``, whose password is known; the page
    reads the ``lakehouse`` catalog connection."""
    passwords = tmp_path / "passwords.json"
    passwords.write_text(json.dumps({USER: PASSWORD}))
    monkeypatch.setenv("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS", f"{USER}:viewer")
    monkeypatch.setenv("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE", str(passwords))
    monkeypatch.setenv("AIRFLOW__API_AUTH__JWT_SECRET", "streambed-tests-" * 5)
    monkeypatch.setenv("AIRFLOW__STREAMBED__CATALOG_CONN_IDS", "lakehouse")


@pytest.fixture
def api_client(viewer: None) -> TestClient:
    """Airflow's API app, in this process."""
    from airflow.api_fastapi.app import create_app, purge_cached_app

    purge_cached_app()
    return TestClient(create_app())


def publish_bank_cuts(connections: dict[str, str], count: int, spacing: float = 0.0) -> Ledger:
    """Publish ``count`` cuts of the bank group (runs ``run1``...), ``spacing`` seconds apart, and pin cut 1."""
    catalog = open_catalog(connections)
    ledger = ledger_of(catalog)
    ledger.create()
    group, warehouse = make_group(), connections["warehouse"]
    for number in range(1, count + 1):
        run_key = f"run{number}"
        manifests = pin_and_stage(ledger, warehouse, "bank", run_key, Lsn(100 * number), bank_tables(number))
        time.sleep(spacing * number)  # the lag grows: the plot draws a slope
        publish_cut(catalog, ledger, group, run_key, manifests)
    ledger.pin_cut("bank", 1)
    return ledger


def test_a_logged_in_user_sees_the_groups_and_their_cuts(
    bank_connections: dict[str, str], api_client: TestClient
) -> None:
    ledger = publish_bank_cuts(bank_connections, 2)

    with api_client as client:
        assert client.get("/streambed/").status_code == 401  # not logged in
        login = client.post("/auth/token", json={"username": USER, "password": PASSWORD})
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


def test_without_a_setting_the_page_finds_the_catalog_connections_of_the_environment(
    bank_connections: dict[str, str], api_client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``make live`` and Helm charts define connections as ``AIRFLOW_CONN_*`` variables: the page
    lists their groups unless told otherwise, names a secrets backend it cannot list, and answers
    an error with a page, not JSON."""
    publish_bank_cuts(bank_connections, 1)
    monkeypatch.delenv("AIRFLOW__STREAMBED__CATALOG_CONN_IDS")
    monkeypatch.setenv("AIRFLOW__SECRETS__BACKEND", "airflow.secrets.local_filesystem.LocalFilesystemBackend")
    with api_client as client:
        login = client.post("/auth/token", json={"username": USER, "password": PASSWORD})
        client.cookies.set("_token", login.json()["access_token"])

        index = client.get("/streambed/")
        assert index.status_code == 200 and "href='groups/lakehouse/bank'" in index.text
        assert "secrets backend airflow.secrets.local_filesystem.LocalFilesystemBackend are not listed" in index.text
        assert "AIRFLOW__STREAMBED__CATALOG_CONN_IDS" in index.text
        assert client.get("/streambed/groups/lakehouse/bank").status_code == 200

        missing = client.get("/streambed/groups/lakehouse/nothing")
        assert missing.status_code == 404 and missing.headers["content-type"].startswith("text/html")
        assert "<h1>404</h1>" in missing.text and "group &#x27;nothing&#x27; has no cut" in missing.text


@pytest.fixture
def api_server(viewer: None, bank_connections: dict[str, str], tmp_path: Path) -> Iterator[str]:
    """``airflow api-server`` on a free port, with this test's Airflow home and connections; its URL."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with components(dict(os.environ), port, tmp_path, names=()) as started:
        try:
            wait_until_healthy(url, started, names=(), timeout=90)
        except RuntimeError as error:
            log = (tmp_path / "api-server.log").read_text()
            pytest.fail(f"airflow api-server did not start: {error}\n{log[-3000:]}")
        yield url


@pytest.fixture
def browser() -> Iterator[Any]:
    """Headless Chromium."""
    with chromium() as driver:
        yield driver


def test_the_page_in_a_real_browser(bank_connections: dict[str, str], api_server: str, browser: Any) -> None:
    from PIL import Image
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ready
    from selenium.webdriver.support.ui import WebDriverWait

    ledger = publish_bank_cuts(bank_connections, 3, spacing=0.5)
    ledger.record_holdback("bank", "run3", 1, 75.0)
    wait = WebDriverWait(browser, 30)

    browser.get(f"{api_server}/streambed/")  # not logged in: refused, no group named
    assert "Not authenticated" in browser.find_element(By.TAG_NAME, "body").text
    assert "bank" not in browser.page_source

    log_in(browser, api_server, USER, PASSWORD)

    browser.get(f"{api_server}/plugin/streambed")  # Browse -> Streambed: the page inside the UI
    wait.until(ready.frame_to_be_available_and_switch_to_it((By.TAG_NAME, "iframe")))
    wait.until(ready.element_to_be_clickable((By.LINK_TEXT, "bank"))).click()
    wait.until(ready.text_to_be_present_in_element((By.TAG_NAME, "h1"), "Group bank"))

    rows = {row.get_attribute("id"): [cell.text for cell in row.find_elements(By.TAG_NAME, "td")]
            for row in browser.find_elements(By.CSS_SELECTOR, "tr[id^='cut-']")}
    assert list(rows) == ["cut-3", "cut-2", "cut-1"]
    for number in (1, 2, 3):
        cut = ledger.get_cut("bank", number)
        run = ledger.get_run("bank", f"run{number}")
        assert cut is not None and run is not None
        lag = (cut.published_at - (run.newest_commit_at or run.pinned_at)).total_seconds()  # its freshness
        expected = [str(number), str(cut.watermark), cut.published_at.isoformat(timespec="seconds"), f"{lag:.1f} s",
                    f"run{number}", "5", "1", "pinned" if number == 1 else ""]
        assert rows[f"cut-{number}"] == expected
    capture = [cell.text for cell in browser.find_elements(By.CSS_SELECTOR, "#last-capture td")]
    assert capture[0] == "run3" and capture[3:] == ["published", "1", "75.0 s"]

    plot = browser.find_element(By.ID, "freshness")  # rendered: the browser laid out a line with length
    line_length = browser.execute_script("return arguments[0].querySelector('polyline').getTotalLength()", plot)
    assert plot.size["width"] > 600 and plot.size["height"] > 150 and line_length > 200
    rgb = Image.open(io.BytesIO(plot.screenshot_as_png)).convert("RGB").tobytes()
    blue = sum(1 for at in range(0, len(rgb), 3) if rgb[at] < 80 and rgb[at + 2] > 200)
    assert blue > 100, "the plot's blue line is not painted"

    browser.switch_to.default_content()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    assert browser.save_screenshot(str(ARTIFACTS / "streambed-page.png"))
