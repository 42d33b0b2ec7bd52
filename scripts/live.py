"""`make live`: a real local Airflow that refreshes the bank's mirrors seconds after each commit.

Starts a throwaway PostgreSQL cluster (``wal_level=logical``) holding both the bank source and
Airflow's metadata database, then Airflow's four components with the LocalExecutor: ``airflow
api-server``, ``scheduler``, ``dag-processor`` and ``triggerer``. The DAG ``streambed_bank_events``
(``dags/example_bank_events.py``) is scheduled on the group's source-changes Asset, whose watcher
runs in the triggerer: a writer moves money between accounts, the trigger fires on its commits,
and each run publishes a cut. The script prints the UI's address, then a line per cut with its
freshness: how long after its commit each transfer became visible in a published cut (p50, p99).
When the writer stops it prints where the runs' time went (:mod:`run_phases`: the scheduler, each
task's start and work). It stops everything on Ctrl-C or after ``--seconds``, checks the bank
invariant on every cut, and exits non-zero when a check fails. Logs, the Airflow home and the
catalog stay in ``.demo/``. With ``--derived`` the DAG is ``streambed_bank_events_connect``
(``dags/example_bank_events_connect.py``): the derived ``balances`` too, computed on a Spark
Connect server that the script starts first and that stays up between runs.

``--rate`` paces the writer (the issue's benchmark: ``--rate 5 --seconds 300 --quiet-seconds 300``);
``--quiet-seconds`` then keeps the source quiet and counts the DAG runs that start (goal 0).

Run: ``.venv/bin/python scripts/live.py [--seconds N] [--rate R] [--quiet-seconds Q] [--port P] [--derived]``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from contextlib import ExitStack
from dataclasses import dataclass

from demo import DEMO_DIR, REPO, run_logged
from run_phases import Api, summary

from airflow_provider_streambed.catalog import open_with_ledger
from airflow_provider_streambed.examples.bank import Writer, cut_problems, load_bank
from airflow_provider_streambed.exceptions import CutNotFoundError
from airflow_provider_streambed.read import CutReader
from airflow_provider_streambed.refresh.spark.connect_server import ConnectServer
from airflow_provider_streambed.testing.airflow import BIN, airflow_env, components, server_env, wait_until_healthy
from airflow_provider_streambed.testing.postgres import ThrowawayCluster, free_port


@dataclass(frozen=True)
class Example:
    """The example DAG the demo runs: its file in ``dags/``, its id and its group."""

    dag_file: str
    dag_id: str
    group: str


#: The bank's mirrors (no Spark), and with ``--derived`` its ``balances`` too, on a Spark Connect server.
MIRRORS = Example("example_bank_events.py", "streambed_bank_events", "bank_live")
DERIVED = Example("example_bank_events_connect.py", "streambed_bank_events_connect", "bank_fresh")
#: How often the examples' change trigger polls the source (``group_asset(..., poll_interval=2.0)``).
POLL_SECONDS = 2.0


class Freshness:
    """Commit -> visible latency of the writer's transfers, as cuts are published."""

    def __init__(self, writer: Writer, catalog: dict[str, str], group: str) -> None:
        self.writer = writer
        self.reader = CutReader(catalog, group)
        self.latencies: list[float] = []
        self.visible: set[int] = set()
        self.last_cut = 0

    def poll(self) -> str | None:
        """Read the latest cut; a line about it when it is new, else ``None``."""
        try:
            cut = self.reader.latest()
        except CutNotFoundError:
            return None
        if cut.cut_id == self.last_cut:
            return None
        now = time.monotonic()
        ids = set(cut.to_arrow("transfers")["id"].to_pylist())
        new = ids - self.visible
        self.latencies += [now - self.writer.committed_at[i] for i in new if i in self.writer.committed_at]
        self.visible |= ids
        self.last_cut = cut.cut_id
        return (f"cut {cut.cut_id}  W={cut.watermark}  +{len(new)} transfers visible  "
                f"freshness so far: {self.summary()}")

    def summary(self) -> str:
        """p50 and p99 of the latencies seen (commit -> visible, seconds)."""
        if len(self.latencies) < 2:
            return "n/a"
        cuts = statistics.quantiles(self.latencies, n=100)
        return f"p50 {statistics.median(self.latencies):.1f} s, p99 {cuts[98]:.1f} s over {len(self.latencies)}"


def run_live(cluster: ThrowawayCluster, port: int, example: Example, seconds: float, rate: float | None,
             quiet_seconds: float) -> bool:
    """Everything after the cluster started; True when Airflow came up and every cut passed."""
    dbname, metadata = cluster.create_database("bank"), cluster.create_database("airflow")
    dsn = cluster.dsn(dbname)
    load_bank(dsn)
    catalog = {"uri": f"sqlite:///{DEMO_DIR / 'catalog.db'}", "warehouse": (DEMO_DIR / "warehouse").as_uri()}
    dags = DEMO_DIR / "dags"  # this DAG alone, active from its first parse (its Asset's watcher with it)
    dags.mkdir()
    shutil.copy(REPO / "dags" / example.dag_file, dags / example.dag_file)
    env = airflow_env(DEMO_DIR, dags, cluster, dbname, catalog, metadata_db=metadata)
    env.update({**server_env(port), "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True"})  # a demo: no login
    code, took = run_logged([str(BIN / "airflow"), "db", "migrate"], env, "airflow-db-migrate.log")
    print(f"airflow db migrate (metadata on the cluster's database {metadata!r}): exit {code} in {took:.0f} s")
    if code != 0:
        return False
    open_with_ledger(catalog)  # the ledger's tables, before the first run makes them
    writer = Writer(dsn) if rate is None else Writer(dsn, pause=1 / rate)
    freshness = Freshness(writer, catalog, example.group)
    with ExitStack() as stack:
        if example is DERIVED:  # a server that stays up between runs: no run starts a JVM
            url = stack.enter_context(ConnectServer(port=free_port(), state_dir=DEMO_DIR / "spark-connect").running())
            print(f"Spark Connect server: {url} (connection spark_connect)")
            env["AIRFLOW_CONN_SPARK_CONNECT"] = json.dumps(
                {"conn_type": "spark_connect", "host": "localhost", "port": int(url.rsplit(":", 1)[1])})
        started = stack.enter_context(components(env, port, DEMO_DIR / "logs"))
        try:
            wait_until_healthy(f"http://127.0.0.1:{port}", started)
        except RuntimeError as error:
            print(f"FAIL: {error} (logs in {DEMO_DIR / 'logs'})")
            return False
        print(f"Airflow UI: http://127.0.0.1:{port}  (logs in {DEMO_DIR / 'logs'}); Ctrl-C stops everything")
        writer.start()
        deadline = time.monotonic() + seconds
        try:
            while time.monotonic() < deadline and all(process.poll() is None for process in started):
                if line := freshness.poll():
                    print(line, flush=True)
                time.sleep(1)
        except KeyboardInterrupt:
            print("\nstopping")
        journal = writer.stop()
        api = Api(f"http://127.0.0.1:{port}")
        if quiet_seconds:
            stay_quiet(api, example.dag_id, freshness, journal, quiet_seconds)
        print_phases(api, example.dag_id)
    print(f"writer stopped after {len(journal)} transfers; freshness: {freshness.summary()} "
          "(goal: within a minute; peers publish in 10-60 s)")
    return check(catalog, example.group, journal, freshness.last_cut)


def stay_quiet(api: Api, dag_id: str, freshness: Freshness, journal: set[int], seconds: float) -> None:
    """Once a cut holds every transfer, keep the source quiet for ``seconds`` and print how many
    DAG runs started meanwhile (goal 0)."""
    deadline = time.monotonic() + 120
    while not journal <= freshness.visible and time.monotonic() < deadline:
        freshness.poll()
        time.sleep(1)
    before = len(api.runs(dag_id))
    time.sleep(seconds)
    started = len(api.runs(dag_id)) - before
    print(f"quiet source for {seconds:.0f} s: {started} DAG runs started (goal 0); the trigger polled about "
          f"{seconds / POLL_SECONDS:.0f} times ({60 / POLL_SECONDS:.0f} a minute), each one statement of about "
          "0.07 ms of server time, no slot, no decoding (benchmarks/bench_trigger_poll)")


def print_phases(api: Api, dag_id: str) -> None:
    """Where the runs' time went."""
    phases = api.phases(dag_id)
    print(f"where the time of a run goes (seconds; the trigger polls the source every {POLL_SECONDS:.0f} s "
          "before its event):")
    print("\n".join(f"  {line}" for line in summary(phases)) if phases else "  no finished run")


def check(catalog: dict[str, str], group: str, journal: set[int], cuts: int) -> bool:
    """The bank invariant on every cut; True when there is at least one cut and all pass."""
    if not cuts:
        print("FAIL: no cut was published")
        return False
    ok = True
    for cut in CutReader(catalog, group).list():
        problems, ids = cut_problems(cut, journal)
        ok = ok and not problems
        print(f"{'OK  ' if not problems else 'FAIL'} cut {cut.cut_id}  W={cut.watermark}  transfers={len(ids)}"
              + "".join(f"\n       {problem}" for problem in problems))
    return ok


def main() -> int:
    """Run the live demo; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=300, help="how long the writer runs (default 300)")
    parser.add_argument("--port", type=int, default=0, help="the api-server's port (default: a free one)")
    parser.add_argument("--rate", type=float, default=None,
                        help="transfers a second (default: one every 5 ms, about 170 a second)")
    parser.add_argument("--quiet-seconds", type=float, default=0,
                        help="then keep the source quiet this long and count the runs started (default 0)")
    parser.add_argument("--derived", action="store_true",
                        help="also the derived balances, on a Spark Connect server that stays up")
    arguments = parser.parse_args()
    shutil.rmtree(DEMO_DIR, ignore_errors=True)
    (DEMO_DIR / "logs").mkdir(parents=True)
    with ThrowawayCluster() as cluster:
        print(f"throwaway PostgreSQL cluster on 127.0.0.1:{cluster.port} (wal_level=logical)")
        ok = run_live(cluster, arguments.port or free_port(), DERIVED if arguments.derived else MIRRORS,
                      arguments.seconds, arguments.rate, arguments.quiet_seconds)
    print(f"live demo {'passed' if ok else 'FAILED'}; cluster removed; Airflow home and logs in {DEMO_DIR}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
