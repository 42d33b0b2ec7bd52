"""The UI path in headless Chromium against a real Airflow: ``airflow api-server``, ``scheduler`` and
``dag-processor`` (LocalExecutor), the metadata database on a throwaway PostgreSQL cluster, and one
DAG (``dags/streambed_ui.py``: the bank's mirrors, triggered by hand).

One Airflow serves the module; its fixture runs the group's first run (the bootstrap copy) through
the REST API. Then: a run triggered from the DAG's Trigger form with a ``watermark_lsn`` publishes
its cut at that W, and the Streambed page lists it; a run whose refresh failed, cleared with the
run's Clear button, publishes the W its capture pinned, once; and the source password, which the
captures needed to log in, is in no log file the run wrote.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from airflow_provider_streambed.catalog import open_with_ledger
from airflow_provider_streambed.examples.bank import load_bank, move_money
from airflow_provider_streambed.ledger import Ledger
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.read import CutReader
from airflow_provider_streambed.run_key import make_run_key
from airflow_provider_streambed.testing.airflow import BIN, airflow_env, components, server_env, wait_until_healthy
from airflow_provider_streambed.testing.postgres import ThrowawayCluster, free_port
from tests.integration.airflow.bank import check_cut
from tests.integration.airflow.browser import ARTIFACTS, chromium, log_in
from tests.integration.airflow.dags.streambed_ui_mask import LOGGED

pytestmark = pytest.mark.slow

DAG_FILE = Path(__file__).with_name("dags") / "streambed_ui.py"
DAG_ID, GROUP, CAPTURE = "streambed_ui", "bank_ui", "bank_ui.capture_watermark"
#: The DAG that logs the source's connection string on purpose (its task log shows the masking).
MASK_DAG_FILE = DAG_FILE.with_name("streambed_ui_mask.py")
MASK_DAG_ID, MASK_TASK = "streambed_ui_mask", "log_source_connection"
ADMIN, ADMIN_PASSWORD = "admin", "admin-pw"
#: The source role's password: the cluster asks the capture role for it (SCRAM), so a run that
#: published logged in with it.
SOURCE_ROLE, SOURCE_PASSWORD = "capture", "Src-pw-5d41402abc4b2a76"
RUN_TIMEOUT = 120.0
#: The modal dialog the UI has open (Chakra's dialog content; closed popovers are dialogs too).
OPEN_DIALOG = "[data-scope=dialog][data-part=content][data-state=open]"


@dataclass(frozen=True)
class Deployment:
    """The running Airflow: its URL, a REST client with an admin's token, the catalog, the source,
    the Airflow home and the components' log folder."""

    url: str
    api: httpx.Client
    catalog: dict[str, str]
    source_dsn: str
    home: Path
    logs: Path

    def trigger(self, conf: dict[str, Any] | None = None, dag_id: str = DAG_ID) -> str:
        """Trigger a run through the REST API; its run id."""
        response = self.api.post(f"/api/v2/dags/{dag_id}/dagRuns", json={"logical_date": None, "conf": conf or {}})
        response.raise_for_status()
        return str(response.json()["dag_run_id"])

    def run_ids(self) -> set[str]:
        """The DAG's run ids."""
        response = self.api.get(f"/api/v2/dags/{DAG_ID}/dagRuns", params={"limit": 100})
        response.raise_for_status()
        return {run["dag_run_id"] for run in response.json()["dag_runs"]}

    def wait_for_run(self, run_id: str, states: tuple[str, ...] = ("success",), dag_id: str = DAG_ID) -> str:
        """Poll the run until it ends; fails (with the logs' tails) unless it ends in one of ``states``."""
        deadline = time.monotonic() + RUN_TIMEOUT
        while time.monotonic() < deadline:
            response = self.api.get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}")
            response.raise_for_status()
            if (state := response.json()["state"]) in ("success", "failed"):
                if state not in states:
                    pytest.fail(f"run {run_id} ended {state}, expected {states}\n{self.log_tails(run_id)}")
                return str(state)
            time.sleep(0.5)
        pytest.fail(f"run {run_id} did not end within {RUN_TIMEOUT:.0f} s\n{self.log_tails(run_id)}")

    def xcom(self, run_id: str, task_id: str) -> Any:
        """The return value a task of the run pushed to XCom."""
        response = self.api.get(f"/api/v2/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries/"
                                "return_value", params={"deserialize": True, "stringify": False})
        response.raise_for_status()
        return response.json()["value"]

    def log_files(self) -> list[Path]:
        """Every log file Airflow wrote: the components' and the task instances'."""
        return sorted([*self.logs.glob("*.log"), *(self.home / "logs").rglob("*.log")])

    def log_tails(self, run_id: str) -> str:
        """The last lines of the components' logs and of the run's task logs, for a failure's message."""
        run_logs = self.home / "logs" / f"dag_id={DAG_ID}" / f"run_id={run_id}"
        return tails(sorted([*self.logs.glob("*.log"), *run_logs.rglob("*.log")]))


def tails(paths: list[Path]) -> str:
    """The last lines of each file, for a failure's message."""
    return "\n".join(f"--- {path}\n{''.join(path.read_text(errors='replace').splitlines(True)[-10:])}"
                     for path in paths)


def log_in_api(url: str) -> httpx.Client:
    """A REST client with the admin's token (the one the UI gets at login)."""
    response = httpx.post(f"{url}/auth/token", json={"username": ADMIN, "password": ADMIN_PASSWORD})
    response.raise_for_status()
    return httpx.Client(base_url=url, headers={"Authorization": f"Bearer {response.json()['access_token']}"},
                        timeout=30)


def wait_for_dags(api: httpx.Client) -> None:
    """Poll until the dag-processor has registered both DAGs."""
    deadline = time.monotonic() + RUN_TIMEOUT
    for dag_id in (DAG_ID, MASK_DAG_ID):
        while api.get(f"/api/v2/dags/{dag_id}").status_code != 200:
            if time.monotonic() > deadline:
                pytest.fail(f"DAG {dag_id} was not registered within {RUN_TIMEOUT:.0f} s")
            time.sleep(0.5)


def deployment_env(env: dict[str, str], port: int, passwords: Path) -> dict[str, str]:
    """``env`` with the settings of a scheduled deployment, one admin who logs in with a password
    (written to ``passwords``), and the Streambed page reading the ``lakehouse`` catalog."""
    passwords.write_text(json.dumps({ADMIN: ADMIN_PASSWORD}))
    env = {**env, **server_env(port),
           "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{ADMIN}:admin",
           "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
           "AIRFLOW__STREAMBED__CATALOG_CONN_IDS": "lakehouse"}
    env.pop("AIRFLOW__CORE__UNIT_TEST_MODE", None)  # the tests' setting, not a deployment's
    return env


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    """A throwaway cluster (source and metadata databases), Airflow migrated on it and started;
    the group's first run published (through the REST API)."""
    directory = tmp_path_factory.mktemp("real-airflow")
    logs, dags = directory / "logs", directory / "dags"
    logs.mkdir()
    dags.mkdir()
    for dag_file in (DAG_FILE, MASK_DAG_FILE):
        shutil.copy(dag_file, dags / dag_file.name)
    with ThrowawayCluster() as cluster:
        source, metadata = cluster.create_database("bank"), cluster.create_database("airflow")
        load_bank(cluster.dsn(source))
        cluster.add_password_role(SOURCE_ROLE, SOURCE_PASSWORD)
        catalog = {"uri": f"sqlite:///{directory / 'catalog.db'}", "warehouse": (directory / "warehouse").as_uri()}
        port = free_port()
        env = deployment_env(airflow_env(directory, dags, cluster, source, catalog, metadata_db=metadata), port,
                             directory / "passwords.json")
        env["AIRFLOW_CONN_BANK_PG"] = json.dumps({"conn_type": "postgres", "host": "127.0.0.1", "port": cluster.port,
                                                  "login": SOURCE_ROLE, "password": SOURCE_PASSWORD, "schema": source})
        with (logs / "db-migrate.log").open("wb") as out:
            migrated = subprocess.run([str(BIN / "airflow"), "db", "migrate"], env=env, stdout=out,
                                      stderr=subprocess.STDOUT, timeout=300, check=False)
        assert migrated.returncode == 0, (logs / "db-migrate.log").read_text()[-3000:]
        open_with_ledger(catalog)
        names = ("scheduler", "dag-processor")  # no triggerer: nothing of this DAG defers
        url = f"http://127.0.0.1:{port}"
        with components(env, port, logs, names) as started:
            try:
                wait_until_healthy(url, started, names)
            except RuntimeError as error:
                pytest.fail(f"{error}\n{tails(sorted(logs.glob('*.log')))}")
            with log_in_api(url) as api:
                wait_for_dags(api)
                airflow = Deployment(url, api, catalog, cluster.dsn(source), Path(env["AIRFLOW_HOME"]), logs)
                airflow.wait_for_run(airflow.trigger())  # the bootstrap copy
                yield airflow


@pytest.fixture(scope="module")
def browser(deployment: Deployment) -> Iterator[Any]:
    """Headless Chromium, logged in to the deployment as its admin."""
    with chromium() as driver:
        log_in(driver, deployment.url, ADMIN, ADMIN_PASSWORD)
        yield driver


def move_money_times(dsn: str, count: int, seed: int) -> set[int]:
    """Commit ``count`` transfers on the source; their ids."""
    rng = random.Random(seed)
    with psycopg.connect(dsn) as conn:
        return {move_money(conn, rng) for _ in range(count)}


def committed_transfers(dsn: str) -> set[int]:
    """Every transfer id on the source."""
    with psycopg.connect(dsn) as conn:
        return {row[0] for row in conn.execute("SELECT id FROM transfers")}


def flushed_lsn(dsn: str) -> Lsn:
    """The source's flushed WAL position."""
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()
    assert row is not None
    return Lsn.parse(row[0])


def test_trigger_form_with_a_watermark_publishes_that_cut(deployment: Deployment, browser: Any) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions as ready
    from selenium.webdriver.support.ui import WebDriverWait

    move_money_times(deployment.source_dsn, 5, seed=1)
    watermark = flushed_lsn(deployment.source_dsn)
    held = committed_transfers(deployment.source_dsn)
    move_money_times(deployment.source_dsn, 5, seed=2)  # after W: not in the cut
    before = deployment.run_ids()
    wait = WebDriverWait(browser, 30)

    browser.get(f"{deployment.url}/dags/{DAG_ID}")
    wait.until(ready.element_to_be_clickable((By.CSS_SELECTOR, "button[aria-label='Trigger Dag']"))).click()
    dialog = wait.until(ready.visibility_of_element_located((By.CSS_SELECTOR, OPEN_DIALOG)))
    field = wait.until(ready.element_to_be_clickable((By.ID, "element_watermark_lsn")))
    field.send_keys(Keys.CONTROL, "a")
    field.send_keys(Keys.DELETE)
    field.send_keys(str(watermark))
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(ARTIFACTS / "trigger-form-watermark.png"))
    dialog.find_element(By.XPATH, ".//button[normalize-space()='Trigger']").click()

    deadline = time.monotonic() + 30
    while not (new := deployment.run_ids() - before):
        assert time.monotonic() < deadline, "the Trigger form started no run"
        time.sleep(0.5)
    (run_id,) = new
    deployment.wait_for_run(run_id)

    ledger = Ledger(deployment.catalog["uri"])
    cut = ledger.cut_for_run(GROUP, make_run_key(DAG_ID, run_id))
    assert cut is not None and cut.watermark == watermark
    assert check_cut(CutReader(deployment.catalog, GROUP).get(cut.cut_id), held) == held

    browser.get(f"{deployment.url}/plugin/streambed")  # Browse -> Streambed
    wait.until(ready.frame_to_be_available_and_switch_to_it((By.TAG_NAME, "iframe")))
    wait.until(ready.element_to_be_clickable((By.LINK_TEXT, GROUP))).click()
    row = wait.until(ready.visibility_of_element_located((By.ID, f"cut-{cut.cut_id}")))
    cells = [cell.text for cell in row.find_elements(By.TAG_NAME, "td")]
    assert cells[:2] == [str(cut.cut_id), str(watermark)]
    browser.switch_to.default_content()
    browser.save_screenshot(str(ARTIFACTS / "streambed-page-real-airflow.png"))


def test_a_failed_refresh_cleared_in_the_ui_publishes_its_pinned_watermark(
    deployment: Deployment, browser: Any
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ready
    from selenium.webdriver.support.ui import WebDriverWait

    move_money_times(deployment.source_dsn, 5, seed=3)
    run_id = deployment.trigger({"fail_refresh_once": True})
    deployment.wait_for_run(run_id, states=("failed",))
    run_key = make_run_key(DAG_ID, run_id)
    ledger = Ledger(deployment.catalog["uri"])
    pinned = ledger.get_run(GROUP, run_key)
    assert pinned is not None and ledger.cut_for_run(GROUP, run_key) is None
    assert Lsn.parse(deployment.xcom(run_id, CAPTURE)["watermark_lsn"]) == pinned.watermark
    move_money_times(deployment.source_dsn, 5, seed=4)  # a capture taken again would pin a later W
    assert flushed_lsn(deployment.source_dsn) > pinned.watermark
    wait = WebDriverWait(browser, 30)

    browser.get(f"{deployment.url}/dags/{DAG_ID}/runs/{run_id}")
    # the run's Clear button (its label names its shortcut) and the confirmation dialog
    wait.until(ready.element_to_be_clickable((By.CSS_SELECTOR, "button[aria-label='Press shift+c to clear']"))).click()
    dialog = wait.until(ready.visibility_of_element_located((By.CSS_SELECTOR, OPEN_DIALOG)))
    confirm = dialog.find_element(By.XPATH, ".//button[normalize-space()='Confirm']")
    wait.until(lambda _: confirm.is_enabled())  # enabled once the dry run listed the tasks to clear
    confirm.click()
    wait.until(ready.invisibility_of_element(dialog))  # closed once the clear request succeeded

    deployment.wait_for_run(run_id)
    capture_logs = deployment.home / "logs" / f"dag_id={DAG_ID}" / f"run_id={run_id}" / f"task_id={CAPTURE}"
    assert (capture_logs / "attempt=2.log").exists(), "the clear did not run the capture again"
    cuts = [cut for cut in ledger.list_cuts(GROUP) if cut.run_key == run_key]
    assert [cut.watermark for cut in cuts] == [pinned.watermark]
    assert Lsn.parse(deployment.xcom(run_id, CAPTURE)["watermark_lsn"]) == pinned.watermark


def test_the_source_password_is_in_no_log(deployment: Deployment) -> None:
    """Every run so far logged in to the source as a role the cluster asks a password of; the
    password is in none of the logs. No line of them carries it masked (``***``) either, Airflow's
    DEBUG lines included (looked at by hand): this shows it is not logged, not the masker at work."""
    task_logs = sorted((deployment.home / "logs").rglob("*.log"))
    captures = [path for path in task_logs if f"task_id={CAPTURE}" in str(path)]
    assert captures, f"no task log of {CAPTURE} under {deployment.home / 'logs'}"
    assert all("connecting to the source database of connection bank_pg" in path.read_text() for path in captures)
    leaking = [path for path in deployment.log_files() if SOURCE_PASSWORD in path.read_text(errors="replace")]
    assert leaking == [], "the source password is in these logs"


def test_the_source_password_is_masked_in_a_task_log(deployment: Deployment) -> None:
    """A task that logs the source's connection string (its line says so) has the string, the
    password in it, replaced by ``***`` in its log: the secrets the hook registers are masked by
    the real scheduler run's log handling."""
    run_id = deployment.trigger(dag_id=MASK_DAG_ID)
    deployment.wait_for_run(run_id, dag_id=MASK_DAG_ID)
    task_logs = deployment.home / "logs" / f"dag_id={MASK_DAG_ID}" / f"run_id={run_id}" / f"task_id={MASK_TASK}"
    text = "".join(path.read_text(errors="replace") for path in sorted(task_logs.glob("*.log")))
    logged = [line for line in text.splitlines() if LOGGED in line]
    assert logged, f"no line of {task_logs} has {LOGGED!r}:\n{text[-2000:]}"
    assert all("***" in line for line in logged) and SOURCE_PASSWORD not in text
