"""A run SIGKILLed at each step, then retried with its run key: one right cut at the pinned W, and
damaged staged output (a truncated or missing file) is computed again (issue 15, item 4).

Each run of the example bank group runs ``refresh_once`` in its own process
(:mod:`.kill_worker`), killed at one point; the retry runs in the test. Transfers are journaled,
so every cut must hold exactly the transfers committed before it, with the bank invariant. The
``spark`` point kills a spark-submit application halfway; every other run and every retry
computes its SQL member on the session's Spark Connect server (a cold spark-submit JVM each
would add no step to kill).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

from airflow_provider_streambed.capture.names import slot_name
from airflow_provider_streambed.examples.bank import load_bank, move_money
from airflow_provider_streambed.exceptions import UnpublishableRunError
from airflow_provider_streambed.ledger import Ledger, RunState
from airflow_provider_streambed.local import refresh_once
from airflow_provider_streambed.read import CutReader
from airflow_provider_streambed.staging import read_member_manifest, staged_manifest, staging_root
from tests.integration.airflow.bank import check_cut

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[3]
MEMBERS = ("accounts", "transfers", "balances")


def local(uri: str) -> Path:
    return Path(uri.removeprefix("file://"))


def kill_at(point: str, props: dict[str, str], run_key: str, dsn: str, remote: str) -> None:
    """Run the worker until it dies at ``point``; ``spark``: kill its process group (a spark-submit
    application too) once the Spark job staged its first member. Other points run Spark on
    ``remote``."""
    environment = {name: value for name, value in os.environ.items() if name != "STREAMBED_SPARK_REMOTE"}
    connect = {} if point == "spark" else {"STREAMBED_SPARK_REMOTE": remote}
    worker = subprocess.Popen(
        [sys.executable, "-m", "tests.integration.airflow.kill_worker", "none" if point == "spark" else point,
         json.dumps(props), run_key],
        cwd=ROOT, env={**environment, "STREAMBED_SOURCE_DSN": dsn, **connect}, start_new_session=True,
    )
    try:
        if point == "spark":
            root = local(staging_root(props["warehouse"], "bank", run_key))
            deadline = time.monotonic() + 300
            while not any((root / member / "_manifest.json").exists() for member in MEMBERS):
                assert worker.poll() is None, "the run ended before the Spark job staged a member"
                assert time.monotonic() < deadline, "the Spark job staged nothing in 300 s"
                time.sleep(0.02)
            os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(300)
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait(30)
    assert worker.returncode == -signal.SIGKILL, f"the worker was not killed at {point} (exit {worker.returncode})"


def staged_files(root: str, member: str) -> list[Path]:
    """The member's staged files that are still in staging (not moved into its table)."""
    manifest = read_member_manifest(root, member)
    assert manifest is not None
    return [local(uri) for uri in manifest.sizes if local(uri).exists()]


def test_a_run_killed_at_any_step_is_retried_into_one_right_cut(
    pg_dsn: str, sqlite_catalog_uri: str, spark_connect_url: str, tmp_path: Path
) -> None:
    sys.path.insert(0, str(ROOT / "dags"))
    from example_bank import bank

    load_bank(pg_dsn)
    props = {"uri": sqlite_catalog_uri, "warehouse": (tmp_path / "warehouse").as_uri()}
    ledger = Ledger(sqlite_catalog_uri)
    reader = CutReader(props, bank)
    rng = random.Random(15)
    journal: set[int] = set()
    points = ("copy", "extract", "spark", "before-publish", "publish-move", "slot-advance")
    for number, point in enumerate(points, start=1):
        with psycopg.connect(pg_dsn) as conn:
            journal |= {move_money(conn, rng) for _ in range(10)}
        run_key = f"run{number}"
        kill_at(point, props, run_key, pg_dsn, spark_connect_url)
        pinned = ledger.get_run("bank", run_key)
        assert (pinned is None) == (point == "copy"), point  # W is pinned after the copies
        root = staging_root(props["warehouse"], "bank", run_key)

        if point == "before-publish":  # a truncated file and a lost one: both members are computed again
            truncated = staged_files(root, "accounts")[0]
            os.truncate(truncated, truncated.stat().st_size // 2)
            staged_files(root, "transfers")[0].unlink()
            assert pinned is not None
            assert staged_manifest(root, "accounts", pinned.watermark) is None
            assert staged_manifest(root, "transfers", pinned.watermark) is None
            assert staged_manifest(root, "balances", pinned.watermark) is not None
        if point == "publish-move":  # a file the dead publish had not moved yet is lost: the run cannot publish
            unmoved = next(m for m in MEMBERS if staged_files(root, m))
            staged_files(root, unmoved)[0].unlink()
            with pytest.raises(UnpublishableRunError, match=f"member '{unmoved}': staged file .* is missing"):
                refresh_once(bank, source_dsn=pg_dsn, catalog_properties=props, run_key=run_key,
                             spark_remote=spark_connect_url)
            failed = ledger.get_run("bank", run_key)
            assert failed is not None and failed.state == RunState.FAILED
            assert len(ledger.list_cuts("bank")) == number - 1
            run_key, pinned = f"{run_key}-next", None  # the group's next run takes over

        result = refresh_once(bank, source_dsn=pg_dsn, catalog_properties=props, run_key=run_key,
                              spark_remote=spark_connect_url)
        assert result.outcome == RunState.PUBLISHED and result.cut.cut_id == number, point
        if pinned is not None:
            assert result.cut.watermark == pinned.watermark, point
        assert [cut.cut_id for cut in reader.list()] == list(range(1, number + 1)), point
        assert check_cut(reader.get(number), journal) == journal, point
        with psycopg.connect(pg_dsn) as conn:
            row = conn.execute("SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = %s",
                               (slot_name(bank),)).fetchone()
        assert row is not None and row[0] == str(result.cut.watermark), point
