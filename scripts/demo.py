"""`make demo`: three Airflow runs of the bank example under a live writer, then the invariant on every cut.

Steps: start a throwaway PostgreSQL cluster (``wal_level=logical``), load the bank schema, start
a writer thread moving money between accounts (one multi-table transaction per transfer), run
``airflow dags test streambed_bank`` three times (a temporary Airflow home with a SQLite metadata
DB, connections from ``AIRFLOW_CONN_*`` variables: the cluster, a SQLite Iceberg catalog, Spark
``local[2]``), then list the cuts with ``streambed cuts list`` and check on every cut that the
total money is constant and every balance equals the initial balance plus its mirrored
transfers. Exits non-zero when a run or a check fails. Files (Airflow home, logs, catalog,
warehouse) stay in ``.demo/`` for inspection; the cluster is removed.
"""

from __future__ import annotations

import datetime as dt
import logging
import shutil
import subprocess
import sys
import time
from pathlib import Path

from airflow_provider_streambed.examples.bank import ACCOUNTS, INITIAL_BALANCE, Writer, cut_problems, load_bank
from airflow_provider_streambed.read import Cut, CutReader
from airflow_provider_streambed.testing.airflow import BIN, airflow_env
from airflow_provider_streambed.testing.postgres import ThrowawayCluster

logger = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parent.parent
DEMO_DIR = REPO / ".demo"
DAG_ID = "streambed_bank"
GROUP = "bank"
RUNS = 3
START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def run_logged(command: list[str], env: dict[str, str], log_name: str) -> tuple[int, float]:
    """Run a command with its output in ``.demo/logs/<log_name>``; returns (exit code, seconds)."""
    log_path = DEMO_DIR / "logs" / log_name
    log_path.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with log_path.open("w") as log:
        code = subprocess.run(command, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=600,
                              check=False).returncode
    return code, time.perf_counter() - started


def check_cuts(catalog: dict[str, str], journal: set[int]) -> bool:
    """Print OK/FAIL per cut; True when there are RUNS cuts with increasing W and all pass."""
    cuts = CutReader(catalog, GROUP).list()
    ok = len(cuts) == RUNS
    if not ok:
        print(f"FAIL: {len(cuts)} cuts published, expected {RUNS}")
    before: set[int] = set()
    previous: Cut | None = None
    for cut in cuts:
        problems, ids = cut_problems(cut, journal)
        if not before <= ids:
            problems.append(f"transfers of the previous cut lost: {sorted(before - ids)[:5]}")
        total = sum(cut.to_arrow("accounts")["balance"].to_pylist())
        if previous is not None and not cut.watermark > previous.watermark:
            problems.append(f"W {cut.watermark} is not after the previous cut's W {previous.watermark}")
        status = "OK  " if not problems else "FAIL"
        print(f"{status} cut {cut.cut_id}  W={cut.watermark}  transfers={len(ids)}  total money={total}"
              + "".join(f"\n       {problem}" for problem in problems))
        ok = ok and not problems
        before, previous = ids, cut
    return ok


def run_demo(cluster: ThrowawayCluster) -> bool:
    """Everything after the cluster started; True when every run and check passed."""
    dbname = cluster.create_database("bank")
    dsn = cluster.dsn(dbname)
    load_bank(dsn)
    print(f"bank schema loaded: {ACCOUNTS} accounts x {INITIAL_BALANCE}, database {dbname!r} on port {cluster.port}")
    catalog = {"uri": f"sqlite:///{DEMO_DIR / 'catalog.db'}", "warehouse": (DEMO_DIR / "warehouse").as_uri()}
    env = airflow_env(DEMO_DIR, REPO / "dags", cluster, dbname, catalog)
    code, seconds = run_logged([str(BIN / "airflow"), "db", "migrate"], env, "airflow-db-migrate.log")
    print(f"airflow db migrate: exit {code} in {seconds:.0f} s")
    if code != 0:
        return False
    writer = Writer(dsn)
    writer.start()
    ok = True
    try:
        for run in range(RUNS):
            logical_date = (START + dt.timedelta(hours=run)).isoformat()
            code, seconds = run_logged([str(BIN / "airflow"), "dags", "test", DAG_ID, logical_date], env,
                                       f"dags-test-{run + 1}.log")
            print(f"run {run + 1}: airflow dags test {DAG_ID} {logical_date}: "
                  f"{'success' if code == 0 else f'FAILED (exit {code})'} in {seconds:.0f} s, "
                  f"{len(writer.journal)} transfers committed so far")
            ok = ok and code == 0
    finally:
        journal = writer.stop()
    print(f"writer stopped after {len(journal)} transfers\n")
    subprocess.run([str(BIN / "streambed"), "cuts", "list", "--catalog-uri", catalog["uri"],
                    "--warehouse", catalog["warehouse"], "--group", GROUP], env=env, check=False)
    print()
    return check_cuts(catalog, journal) and ok


def main() -> int:
    """Run the demo; returns the exit code."""
    started = time.perf_counter()
    shutil.rmtree(DEMO_DIR, ignore_errors=True)
    DEMO_DIR.mkdir(parents=True)
    with ThrowawayCluster() as cluster:
        print(f"throwaway PostgreSQL cluster on 127.0.0.1:{cluster.port} (wal_level=logical)")
        ok = run_demo(cluster)
    print(f"\ncluster stopped and removed; Airflow home, logs, catalog and warehouse in {DEMO_DIR}")
    print(f"demo {'passed' if ok else 'FAILED'} in {time.perf_counter() - started:.0f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
