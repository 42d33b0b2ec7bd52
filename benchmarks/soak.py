"""Soak: many refreshes of the bank group under writers, a real fault in a third of them (issue 15, item 9).

On private PostgreSQL clusters (the source, and the catalog database), a warehouse directory and
a warm Spark Connect server (started here unless ``--spark-remote`` names one), two writers move
money while ``--runs`` runs of the example bank group follow one another. About a third of the
runs (``--fault-rate``) meet one fault, chosen at random:

- ``source-down``: the source database is stopped as the run starts (the writers pause with it);
- ``source-lost``: the capture's source connection is terminated after the pin;
- ``spark-down``: the Spark Connect server's address refuses connections;
- ``catalog-down``: the catalog database is stopped as the publish starts;
- ``commit-cut``: the catalog connection is terminated inside the publish transaction, before COMMIT;
- ``kill-<point>``: the whole process is SIGKILLed after the extraction, before the publish,
  while publish moves files, or before the slot advance (a worker process,
  ``tests/integration/airflow/kill_worker.py``).

Each failed run is repaired and retried with its run key until it publishes (at most 3 tries).
At the end the writers stop, one last run publishes everything committed, and every cut is
checked: the bank invariant (:func:`~airflow_provider_streambed.examples.bank.cut_problems`), no
transfer twice or never committed, and the last cut holds every journaled transfer. Printed:
runs, faults by kind, cuts, lost and doubled transfers (goal 0 and 0).

Run: ``.venv/bin/python -m benchmarks.soak [--runs 30] [--quick]``; ``--runs 1000`` for a long soak. The
test suite runs 15 runs with a seed that injects every kind of fault
(``tests/integration/test_soak.py``).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import logging
import os
import random
import signal
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from airflow_provider_streambed.examples.bank import Writer, cut_problems, load_bank
from airflow_provider_streambed.local import refresh_once
from airflow_provider_streambed.read import CutReader
from airflow_provider_streambed.testing.postgres import ThrowawayCluster, free_port
from benchmarks.connect_server import REMOTE_HELP, connect_server
from benchmarks.quick import parse_arguments

ROOT = Path(__file__).resolve().parents[1]
KILL_POINTS = ("extract", "before-publish", "publish-move", "slot-advance")
FAULTS = ("source-down", "source-lost", "spark-down", "catalog-down", "commit-cut",
          *(f"kill-{point}" for point in KILL_POINTS))
MAX_TRIES = 3


@dataclass
class SoakReport:
    """What a soak did and found."""

    runs: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    failed_tries: int = 0
    unfailed: int = 0
    cuts: int = 0
    problems: list[str] = field(default_factory=list)
    lost: int = 0
    doubled: int = 0

    def lines(self) -> list[str]:
        """The printed summary, with the goals."""
        faults = ", ".join(f"{kind} {count}" for kind, count in sorted(self.faults.items())) or "none"
        return [
            f"runs {self.runs}, faults {sum(self.faults.values())} ({faults}), failed tries {self.failed_tries}, "
            f"faults that failed nothing {self.unfailed}",
            f"cuts {self.cuts}, cuts breaking the bank invariant {len(self.problems)}   goal 0",
            f"lost transfers {self.lost}   goal 0",
            f"doubled transfers {self.doubled}   goal 0",
        ]


class Soak:
    """The services of one soak and the faults it injects."""

    def __init__(self, source: ThrowawayCluster, catalog_db: ThrowawayCluster, warehouse: Path, remote: str) -> None:
        from example_bank import bank  # dags/ is on the path (soak)

        self.group = bank
        self.source, self.catalog_db, self.remote = source, catalog_db, remote
        self.dsn = source.dsn(source.create_database("bank"))
        self.props = {"uri": f"postgresql+psycopg://streambed@127.0.0.1:{catalog_db.port}/"
                             f"{catalog_db.create_database('lake')}",
                      "warehouse": warehouse.as_uri()}
        self.writers: list[Writer] = []
        self.journal: set[int] = set()
        self.seed = 0

    def start_writers(self) -> None:
        """Two writers moving money."""
        for _ in range(2):
            self.seed += 1
            self.writers.append(Writer(self.dsn, seed=self.seed))
            self.writers[-1].start()

    def stop_writers(self) -> None:
        """Stop the writers and keep their journals."""
        for writer in self.writers:
            self.journal |= writer.stop()
        self.writers = []

    def refresh(self, run_key: str, remote: str | None = None) -> int:
        """One try of the run in this process; returns its cut id."""
        result = refresh_once(self.group, source_dsn=self.dsn, catalog_properties=self.props, run_key=run_key,
                              spark_remote=remote or self.remote)
        return result.cut.cut_id

    def faulty_try(self, fault: str, run_key: str) -> None:
        """The run's first try under ``fault`` (it is expected to fail), then the repair."""
        if fault == "source-down":
            self.stop_writers()  # their transactions would die with the server, outcome unknown
            self.source.pause()
            try:
                self.refresh(run_key)
            finally:
                self.source.resume()
                self.start_writers()
        elif fault == "source-lost":
            with patched("airflow_provider_streambed.capture.run", "extract_changes", self._terminating_source):
                self.refresh(run_key)
        elif fault == "spark-down":
            self.refresh(run_key, remote=f"sc://127.0.0.1:{free_port()}")
        elif fault == "catalog-down":
            with patched("airflow_provider_streambed.steps", "publish_cut", self._stopping_catalog):
                try:
                    self.refresh(run_key)
                finally:
                    self.catalog_db.resume()
        elif fault == "commit-cut":
            with patched("airflow_provider_streambed.steps", "publish_cut", self._cutting_commit):
                self.refresh(run_key)
        else:
            self._kill(fault.removeprefix("kill-"), run_key)

    def _terminating_source(self, real: Callable[..., Any]) -> Callable[..., Any]:
        def extract(conn: psycopg.Connection[Any], *args: Any, **kwargs: Any) -> Any:
            with psycopg.connect(self.dsn, autocommit=True) as killer:
                killer.execute("SELECT pg_terminate_backend(%s)", (conn.info.backend_pid,))
            return real(conn, *args, **kwargs)
        return extract

    def _stopping_catalog(self, real: Callable[..., Any]) -> Callable[..., Any]:
        def publish(*args: Any, **kwargs: Any) -> Any:
            self.catalog_db.pause()
            return real(*args, **kwargs)
        return publish

    def _cutting_commit(self, real: Callable[..., Any]) -> Callable[..., Any]:
        def before_commit(connection: Any) -> None:
            pid = connection.connection.dbapi_connection.info.backend_pid
            with psycopg.connect(self.catalog_db.dsn("postgres"), autocommit=True) as killer:
                killer.execute("SELECT pg_terminate_backend(%s)", (pid,))

        def publish(*args: Any, **kwargs: Any) -> Any:
            return real(*args, **kwargs, before_commit=before_commit)
        return publish

    def _kill(self, point: str, run_key: str) -> None:
        worker = subprocess.run(
            [sys.executable, "-m", "tests.integration.airflow.kill_worker", point, json.dumps(self.props), run_key],
            cwd=ROOT, env={**os.environ, "STREAMBED_SOURCE_DSN": self.dsn, "STREAMBED_SPARK_REMOTE": self.remote},
            capture_output=True, check=False,
        )
        if worker.returncode == -signal.SIGKILL:
            raise RuntimeError(f"killed at {point}")  # the try failed: its process died
        logging.warning("run %s: the worker was not killed at %s (exit %d): %s", run_key, point, worker.returncode,
                        worker.stderr.decode()[-500:])


@contextlib.contextmanager
def patched(module_name: str, name: str, wrap: Callable[[Callable[..., Any]], Callable[..., Any]]) -> Iterator[None]:
    """Replace ``module.name`` by ``wrap(original)`` while the block runs."""
    module = importlib.import_module(module_name)
    original = getattr(module, name)
    setattr(module, name, wrap(original))
    try:
        yield
    finally:
        setattr(module, name, original)


def soak(runs: int, fault_rate: float, seed: int, remote: str, work: Path) -> SoakReport:
    """Run the soak against ``remote`` (a Spark Connect URL) with its files under ``work``."""
    rng = random.Random(seed)
    report = SoakReport()
    if str(ROOT / "dags") not in sys.path:
        sys.path.insert(0, str(ROOT / "dags"))
    with ThrowawayCluster() as source, ThrowawayCluster() as catalog_db:
        state = Soak(source, catalog_db, work / "warehouse", remote)
        load_bank(state.dsn)
        state.start_writers()
        try:
            for number in range(1, runs + 1):
                run_key = f"soak-{number:05d}"
                report.runs += 1
                if rng.random() < fault_rate:
                    fault = rng.choice(FAULTS)
                    report.faults[fault] += 1
                    try:
                        state.faulty_try(fault, run_key)
                    except Exception as error:  # the fault's failure; the retry below must publish
                        report.failed_tries += 1
                        logging.info("run %s: %s failed as injected: %s", run_key, fault, str(error)[:200])
                    else:
                        report.unfailed += 1
                for attempt in range(1, MAX_TRIES + 1):
                    try:
                        report.cuts = state.refresh(run_key)
                        break
                    except Exception:
                        report.failed_tries += 1
                        if attempt == MAX_TRIES:
                            raise
        finally:
            state.stop_writers()
        report.runs += 1
        report.cuts = state.refresh("soak-final")  # after the last write: must hold every transfer
        reader = CutReader(state.props, state.group)
        for cut in reader.list():
            problems, _ = cut_problems(cut, state.journal)
            report.problems += [f"cut {cut.cut_id}: {problem}" for problem in problems]
        last = reader.latest().to_arrow("transfers")["id"].to_pylist()
        report.lost = len(state.journal - set(last))
        report.doubled = len(last) - len(set(last)) + len(set(last) - state.journal)
    return report


def main(argv: list[str] | None = None) -> SoakReport:
    """Parse the arguments, run the soak, print and return its report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30, help="runs of the group (default 30; 1000 for a long soak)")
    parser.add_argument("--fault-rate", type=float, default=1 / 3, help="share of runs with a fault (default 1/3)")
    parser.add_argument("--seed", type=int, default=15)
    parser.add_argument("--spark-remote", default=None, help=REMOTE_HELP)
    arguments = parse_arguments(parser, quick={"runs": 2}, argv=argv)  # seed 15: a fault in the second
    logging.basicConfig(level=logging.WARNING)
    with tempfile.TemporaryDirectory(prefix="streambed-soak-") as directory, \
            connect_server(arguments.spark_remote, Path(directory, "connect")) as remote:
        report = soak(arguments.runs, arguments.fault_rate, arguments.seed, remote, Path(directory))
    print(f"## Soak: the bank group, {arguments.runs} runs under two writers, faults in about "
          f"{arguments.fault_rate:.0%} of them")
    for line in report.lines():
        print(line)
    for problem in report.problems[:10]:
        print(f"  {problem}")
    return report


if __name__ == "__main__":
    main()
