"""Benchmark of freshness: commit -> visible in a cut, for the bank's mirrors driven by the change trigger.

A writer moves money at about ``--rate`` transactions per second on a throwaway PostgreSQL cluster
for ``--seconds``; each transfer's commit time is noted. Runs of a mirrors-only bank group
(``refresh_once``: capture, in-process merge, publish) are started by the group's
:class:`~airflow_provider_streambed.triggers.changes.GroupChangesTrigger` (``--driver trigger``:
one trigger, events arriving during a run collapse into the next, as a DAG with
``max_active_runs=1`` scheduled on the group's Asset does), by a new trigger's first event before
each run (``--driver deferrable``, as a deferrable capture under ``@continuous`` waits; its trigger
starts ``--start-gap`` seconds after the previous run, Airflow's time to start the next run and task), or back to
back (``--driver loop``). After each cut the
transfers it holds are read with ``CutReader``: a transfer's latency is from its commit to the
moment its cut was read. Then the writer stops and the source stays quiet for
``--quiet-seconds`` (while ``--noise`` transactions a second commit in another database of the
cluster): the runs the trigger starts meanwhile are counted (goal 0). Airflow's own
scheduling and task start are not in these figures (no scheduler runs here): the same benchmark
in a real Airflow (api-server, scheduler, dag-processor, triggerer, LocalExecutor) is
``scripts/live.py --rate 5 --seconds 300 --quiet-seconds 300`` (``make live``; ``--derived`` for
the derived ``balances`` on a Spark Connect server), which also prints where a run's time goes.
Prints percentiles beside the goals; no assertion on time.

    .venv/bin/python -m benchmarks.bench_freshness [--seconds 300] [--rate 5] [--noise 1]
        [--driver trigger|deferrable|loop] [--start-gap 3] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import random
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="streambed-bench-airflow-"))

import psycopg
from psycopg.conninfo import conninfo_to_dict

from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.examples.bank import load_bank, move_money
from airflow_provider_streambed.local import StepTimes, refresh_once
from airflow_provider_streambed.member_declarations import Mirror
from airflow_provider_streambed.read import CutReader
from airflow_provider_streambed.testing.postgres import ThrowawayCluster
from airflow_provider_streambed.triggers.changes import GroupChangesTrigger
from benchmarks.quick import parse_arguments

GROUP = RefreshGroup(name="bank_fresh", source_conn_id="bench_source", catalog_conn_id="bench_catalog",
                     namespace="bank_fresh", members=(Mirror("public.accounts"), Mirror("public.transfers")))


@dataclass
class Freshness:
    """Commit times of the writer's transfers, the latencies of those seen in cuts, and the runs."""

    committed: dict[int, float] = field(default_factory=dict)
    seen: set[int] = field(default_factory=set)
    latencies: list[float] = field(default_factory=list)
    runs: list[StepTimes] = field(default_factory=list)
    writing: threading.Event = field(default_factory=threading.Event)
    caught_up_at: float | None = None
    quiet_runs: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def write(self, dsn: str, rate: float, seconds: float) -> None:
        """Move money about ``rate`` times a second for ``seconds``, noting each commit's time."""
        rng = random.Random(11)
        self.writing.set()
        until = time.monotonic() + seconds
        with psycopg.connect(dsn) as conn:
            while time.monotonic() < until:
                transfer = move_money(conn, rng)
                with self.lock:
                    self.committed[transfer] = time.monotonic()
                time.sleep(1 / rate)
        self.writing.clear()

    def run(self, dsn: str, properties: dict[str, str]) -> None:
        """One run of the group, then the latencies of the transfers its cut made visible.

        A run that starts after the writer stopped and every transfer was visible counts as a
        run on a quiet source.
        """
        if self.caught_up_at is not None:
            self.quiet_runs += 1
        times = StepTimes()
        refresh_once(GROUP, source_dsn=dsn, catalog_properties=properties, times=times)
        ids = CutReader(properties, GROUP).latest().to_arrow("transfers").column("id").to_pylist()
        now = time.monotonic()
        with self.lock:
            new = set(ids) - self.seen
            self.latencies.extend(now - self.committed[i] for i in new if i in self.committed)
            self.seen |= new
            if self.caught_up_at is None and not self.writing.is_set() and self.seen >= set(self.committed):
                self.caught_up_at = now
        if self.caught_up_at is None or self.caught_up_at == now:
            self.runs.append(times)


async def drive_deferred(freshness: Freshness, dsn: str, properties: dict[str, str], poll: float,
                         until: float, gap: float) -> None:
    """Runs until ``until`` (monotonic), each after a new trigger's first event, as a deferrable capture waits."""
    while time.monotonic() < until:
        await asyncio.sleep(gap)
        events = GroupChangesTrigger.for_group(GROUP, poll_interval=poll).run()
        waiting = asyncio.ensure_future(anext(events))
        done, _ = await asyncio.wait([waiting], timeout=max(0.0, until - time.monotonic()))
        waiting.cancel()
        if not done:
            break
        await asyncio.to_thread(freshness.run, dsn, properties)


async def drive_by_trigger(freshness: Freshness, dsn: str, properties: dict[str, str], poll: float,
                           until: float) -> None:
    """Runs started by one trigger's events until ``until`` (monotonic), one at a time (an asset watcher)."""
    pending = asyncio.Event()

    async def watch() -> None:
        async for _ in GroupChangesTrigger.for_group(GROUP, poll_interval=poll).run():
            pending.set()

    watcher = asyncio.create_task(watch())
    try:
        while time.monotonic() < until:
            try:
                await asyncio.wait_for(pending.wait(), max(0.0, until - time.monotonic()))
            except TimeoutError:
                break
            pending.clear()
            await asyncio.to_thread(freshness.run, dsn, properties)
    finally:
        watcher.cancel()


def write_noise(dsn: str, rate: float, freshness: Freshness, until: float) -> None:
    """Once the writer stopped, commit about ``rate`` transactions a second to another database until ``until``."""
    if rate <= 0:
        return
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS noise (at timestamptz)")
        while time.monotonic() < until:
            time.sleep(1 / rate)
            if not freshness.writing.is_set():
                conn.execute("INSERT INTO noise VALUES (now())")


def connections(dsn: str, properties: dict[str, str]) -> None:
    """The group's two Airflow connections as ``AIRFLOW_CONN_*`` variables (the trigger resolves them)."""
    params = conninfo_to_dict(dsn)
    os.environ["AIRFLOW_CONN_BENCH_SOURCE"] = json.dumps({
        "conn_type": "postgres", "host": params["host"], "port": int(str(params["port"])),
        "login": params["user"], "schema": params["dbname"]})
    os.environ["AIRFLOW_CONN_BENCH_CATALOG"] = json.dumps({"conn_type": "streambed_catalog", "extra": properties})


def percentile(values: list[float], q: int) -> float:
    """The ``q``-th percentile of ``values``."""
    return statistics.quantiles(values, n=100)[q - 1] if len(values) > 1 else values[0]


def drive(args: argparse.Namespace, freshness: Freshness, dsn: str, properties: dict[str, str], until: float) -> None:
    """Start runs the way ``--driver`` says until ``until`` (monotonic)."""
    if args.driver == "trigger":
        asyncio.run(drive_by_trigger(freshness, dsn, properties, args.poll_interval, until))
    elif args.driver == "deferrable":
        asyncio.run(drive_deferred(freshness, dsn, properties, args.poll_interval, until, args.start_gap))
    else:
        while freshness.caught_up_at is None:
            freshness.run(dsn, properties)


def main() -> None:
    """Write while runs go, then stay quiet; print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=300)
    parser.add_argument("--rate", type=float, default=5)
    parser.add_argument("--quiet-seconds", type=float, default=60)
    parser.add_argument("--poll-interval", type=float, default=2.0)
    parser.add_argument("--driver", choices=["trigger", "deferrable", "loop"], default="trigger")
    parser.add_argument("--start-gap", type=float, default=3.0,
                        help="seconds from a run's end to the next deferrable capture's trigger")
    parser.add_argument("--noise", type=float, default=0.0,
                        help="transactions/s in another database of the cluster while the source is quiet")
    args = parse_arguments(parser, quick={"seconds": 2, "quiet_seconds": 4, "poll_interval": 0.5, "start_gap": 0.5})
    logging.basicConfig(level=logging.WARNING)
    freshness = Freshness()
    with ThrowawayCluster() as cluster, tempfile.TemporaryDirectory() as directory:
        dsn = cluster.dsn(cluster.create_database())
        load_bank(dsn)
        with psycopg.connect(dsn) as conn:
            move_money(conn, random.Random(1))  # transfers is not empty at the first cut
        properties = {"uri": f"sqlite:///{Path(directory) / 'catalog.db'}",
                      "warehouse": (Path(directory) / "warehouse").as_uri()}
        connections(dsn, properties)
        refresh_once(GROUP, source_dsn=dsn, catalog_properties=properties)  # the first cut: a copy
        until = time.monotonic() + args.seconds + args.quiet_seconds
        threads = [threading.Thread(target=freshness.write, args=(dsn, args.rate, args.seconds), daemon=True),
                   threading.Thread(target=write_noise, args=(cluster.dsn(), args.noise, freshness, until),
                                    daemon=True)]
        for thread in threads:
            thread.start()
        freshness.writing.wait()
        drive(args, freshness, dsn, properties, until)
        for thread in threads:
            thread.join()

    latencies, runs = freshness.latencies, freshness.runs
    print(f"driver={args.driver}: writer at {args.rate:g} tx/s for {args.seconds:g} s: {len(freshness.committed)} "
          f"transfers, {len(runs)} runs until all were visible")
    print(f"  commit -> visible: p50 {percentile(latencies, 50):5.1f} s  p99 {percentile(latencies, 99):5.1f} s  "
          f"max {max(latencies):5.1f} s   (goal p50 <= 15 s, p99 <= 30 s; peers 10-60 s, 'within a minute')")
    print(f"  a run: mean {statistics.mean(t.capture + t.refresh + t.publish for t in runs):5.2f} s  (capture "
          f"{statistics.mean(t.capture for t in runs):.2f}, refresh {statistics.mean(t.refresh for t in runs):.2f}, "
          f"publish {statistics.mean(t.publish for t in runs):.2f})")
    if args.driver != "loop" and freshness.caught_up_at is not None:
        quiet = until - freshness.caught_up_at
        print(f"  quiet source for {quiet:.0f} s ({args.noise:g} tx/s in another database): {freshness.quiet_runs} "
              f"runs started (goal 0), {60 / args.poll_interval:.0f} polls/min "
              "(cost per poll: benchmarks/bench_trigger_poll.py)")


if __name__ == "__main__":
    main()
