"""Benchmark of the production shape against one machine (issue 47); prints figures, ratios and goals.

One source table ``facts`` (id, grp, amount numeric, note, timestamptz) of ``--rows`` rows, mirrored
with a derived SQL member over it (so that every run starts a Spark application), by two groups
side by side on the same PostgreSQL:

- **one machine**: a SQL catalog and its warehouse on the local disk, staging there, spark-submit
  ``local[2]``;
- **cluster shape**: a standalone master and two workers in network namespaces with a private
  ``/tmp`` (:class:`~airflow_provider_streambed.testing.spark_cluster.NamespacedSparkCluster`),
  SeaweedFS on the cluster's bridge as S3 and REST catalog, staging in an S3 bucket, spark-submit
  in client mode.

Each shape runs a first run (copy and publish) and, after ``--changed`` (0.1 % by default) random
updates in one transaction, a change run. Printed: each run's seconds and the cluster / one-machine
ratio (goal <= 1.5x), and the bytes through the Airflow worker's process in the change run (its own
reads and writes, sockets included, from ``/proc/self/io``; the Spark driver is a child process and
not counted) against the run's changelog bytes (goal <= 2x, whatever the mirror's size).

Run: ``.venv/bin/python -m benchmarks.bench_cluster [--rows 10000000] [--quick]`` (as root: the
cluster needs network namespaces).
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import psycopg
from pyarrow import fs

from airflow_provider_streambed import local, storage
from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.local import refresh_once
from airflow_provider_streambed.member_declarations import Mirror, SqlMember
from airflow_provider_streambed.refresh import run_local_spark_submit
from airflow_provider_streambed.staging import CaptureManifest, JobSpec, read_json
from airflow_provider_streambed.testing.postgres import ThrowawayCluster
from airflow_provider_streambed.testing.seaweed import REGION, ThrowawaySeaweed
from airflow_provider_streambed.testing.spark_cluster import NamespacedSparkCluster
from benchmarks.quick import parse_arguments

RUN_GOAL = 1.5
WORKER_BYTES_GOAL = 2.0


def group(name: str) -> RefreshGroup:
    """The benchmark's group: the ``facts`` mirror and a GROUP BY over it."""
    return RefreshGroup(name=name, source_conn_id="unused", catalog_conn_id="unused", namespace=name,
                        members=(Mirror("facts"), SqlMember(
                            "by_grp", "SELECT grp, count(*) AS n, sum(amount) AS total FROM facts GROUP BY grp",
                            sources=("facts",))))


def load_source(dsn: str, rows: int) -> None:
    """The ``facts`` table of ``rows`` rows."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE facts (id bigint PRIMARY KEY, grp int NOT NULL, amount numeric(14, 2), "
                     "note text, at timestamptz NOT NULL)")
        conn.execute("INSERT INTO facts SELECT g, g %% 100, (g %% 100000) / 100.0, 'note ' || g, "
                     "'2026-01-01'::timestamptz + g * interval '1 second' FROM generate_series(1, %s) g", (rows,))
        conn.execute("ANALYZE facts")


def update_randomly(dsn: str, changed: int) -> None:
    """Update ``changed`` random rows of ``facts`` in one transaction."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("UPDATE facts SET amount = amount + 1, note = 'changed' WHERE id IN "
                     "(SELECT id FROM facts ORDER BY random() LIMIT %s)", (changed,))


def worker_bytes() -> int:
    """Bytes this process has read and written so far (files and sockets: ``rchar`` + ``wchar``).

    Linux adds a child's counts to its parent's when the child is reaped: the spark-submit driver's
    (a JVM reading its jars) arrive when the submit returns, so a run's own bytes are its total less
    the submit's (:class:`ChangelogBytes`)."""
    counters = dict(line.split(": ") for line in Path("/proc/self/io").read_text().splitlines())
    return int(counters["rchar"]) + int(counters["wchar"])


class ChangelogBytes:
    """Sums the changelog segments of the runs whose job is submitted, and the bytes this process
    moves while spark-submit runs (reading its output): a spy around the real spark-submit."""

    def __init__(self) -> None:
        self.last = 0
        self.submit_bytes = 0

    def submit(self, spec_uri: str, **options: object) -> None:
        data = read_json(spec_uri)
        assert data is not None
        manifest = read_json(JobSpec.from_dict(data).capture_manifest)
        assert manifest is not None
        files = [uri for table in CaptureManifest.from_dict(manifest).tables for uri in table.files]
        self.last = sum(storage.filesystem(uri)[0].get_file_info(storage.filesystem(uri)[1]).size or 0
                        for uri in files)
        before = worker_bytes()
        run_local_spark_submit(spec_uri, **options)  # type: ignore[arg-type]
        self.submit_bytes = worker_bytes() - before


@contextmanager
def cluster_shape(directory: Path, name: str) -> Iterator[Callable[[str], float]]:
    """The cluster shape; yields a function running one refresh of group ``name`` (seconds)."""
    with ExitStack() as stack:
        environment = {"AWS_ACCESS_KEY_ID": ThrowawaySeaweed.access_key, "AWS_REGION": REGION,  # the cluster's own
                       "AWS_SECRET_ACCESS_KEY": ThrowawaySeaweed.secret_key}
        cluster = stack.enter_context(NamespacedSparkCluster(directory / "spark", environment))
        weed = stack.enter_context(ThrowawaySeaweed(host=cluster.address))
        bucket = f"staging-{uuid.uuid4().hex[:8]}"
        fs.S3FileSystem(access_key=weed.access_key, secret_key=weed.secret_key, region=REGION, scheme="http",
                        endpoint_override=weed.s3_endpoint, allow_bucket_creation=True).create_dir(bucket)
        properties = {**weed.catalog_properties(), "streambed.ledger-uri": f"sqlite:///{directory / 'ledger.db'}",
                      "streambed.staging-uri": f"s3://{bucket}/lake"}

        def run(dsn: str) -> float:
            started = time.monotonic()
            refresh_once(group(name), source_dsn=dsn, catalog_properties=properties, master=cluster.master,
                         spark_conf=cluster.driver_conf())
            return time.monotonic() - started

        yield run


def one_machine(directory: Path, name: str) -> Callable[[str], float]:
    """One machine: a function running one refresh of group ``name`` on the local disk (seconds)."""
    properties = {"uri": f"sqlite:///{directory / 'catalog.db'}", "warehouse": (directory / "warehouse").as_uri()}

    def run(dsn: str) -> float:
        started = time.monotonic()
        refresh_once(group(name), source_dsn=dsn, catalog_properties=properties, master="local[2]")
        return time.monotonic() - started

    return run


def main() -> None:
    """Run both shapes side by side and print the figures with the goals."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows of the source table")
    parser.add_argument("--changed", type=float, default=0.001, help="share of rows updated before the change run")
    arguments = parse_arguments(parser, {"rows": 20_000})
    changelogs = ChangelogBytes()
    local.run_local_spark_submit = changelogs.submit  # type: ignore[assignment]  # the real submit, measured
    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as temporary, ThrowawayCluster() as postgres:
        directory = Path(temporary)
        dsn = postgres.dsn(postgres.create_database())
        load_source(dsn, arguments.rows)
        (directory / "local").mkdir()
        (directory / "cluster").mkdir()
        local_run = one_machine(directory / "local", "one_machine")
        with cluster_shape(directory / "cluster", "cluster_shape") as cluster_run:
            first = {"one machine": local_run(dsn), "cluster": cluster_run(dsn)}
            update_randomly(dsn, max(1, int(arguments.rows * arguments.changed)))
            change, through = {}, {}
            for shape, run in (("one machine", local_run), ("cluster", cluster_run)):
                before = worker_bytes()
                change[shape] = run(dsn)
                through[shape] = (worker_bytes() - before, changelogs.last, changelogs.submit_bytes)
    print(f"rows={arguments.rows} changed={arguments.changed:.3%}")
    for label, times in (("first run (copy + publish)", first), ("0.1 % change run", change)):
        ratio = times["cluster"] / times["one machine"]
        print(f"{label}: one machine {times['one machine']:.1f} s, cluster {times['cluster']:.1f} s, "
              f"ratio {ratio:.2f}x (goal <= {RUN_GOAL}x)")
    for shape, (moved, changelog, submit) in through.items():
        own = moved - submit
        print(f"change run, {shape}: {own / 2**20:.2f} MiB through the worker's own process (besides "
              f"{submit / 2**20:.1f} MiB of its spark-submit child), changelog {changelog / 2**20:.3f} MiB, ratio "
              f"{own / max(changelog, 1):.1f}x (goal <= {WORKER_BYTES_GOAL}x)")


if __name__ == "__main__":
    main()
