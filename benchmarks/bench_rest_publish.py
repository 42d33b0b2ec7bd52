"""Publish of an N-table cut through a REST catalog (SeaweedFS, S3) vs one single-table REST commit,
and the upload rate of staged files into the S3 warehouse.

Run: ``.venv/bin/python -m benchmarks.bench_rest_publish [--tables 20] [--repeats 3] [--upload-mb 64] [--quick]``.
Prints figures measured side by side in one run against one throwaway ``weed mini`` (no timed
assertions), with the CPU time the client (this process) and the server spent on each, and the
least time that CPU allows on this machine's cores. Each cut replaces every member with one
staged Parquet file of 100 rows (tables exist; the first cut is not timed); the single-table
baseline is pyiceberg's overwrite and tag of one table committed through
``RestCatalog.commit_table`` (N of them one after another would be N times that: the last column
compares the cut with that). The upload figure times
:func:`airflow_provider_streambed.storage.transfer` of local staged files into the warehouse
bucket, the step publish runs before its commit, one file after another.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

import psutil
import pyarrow as pa
import pyarrow.parquet as pq

from airflow_provider_streambed import storage
from airflow_provider_streambed.catalog import ledger_of, open_catalog, staging_of
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.publish import publish_cut
from airflow_provider_streambed.testing.seaweed import ThrowawaySeaweed
from benchmarks.bench_publish import _frame, _pyiceberg_replace
from benchmarks.quick import parse_arguments
from tests.integration.publish.helpers import make_group, stage


class Timing:
    """Wall and CPU seconds (of this process and of the server's processes) of timed sections."""

    def __init__(self, server: ThrowawaySeaweed) -> None:
        self.client = psutil.Process()
        self.server = [psutil.Process(server.pid), *psutil.Process(server.pid).children(recursive=True)]
        self.wall: list[float] = []
        self.client_cpu: list[float] = []
        self.server_cpu: list[float] = []

    def _cpu(self) -> tuple[float, float]:
        return _cpu_of([self.client]), _cpu_of(self.server)

    @contextmanager
    def section(self) -> Iterator[None]:
        """Time the block."""
        client, server = self._cpu()
        started = time.perf_counter()
        yield
        self.wall.append(time.perf_counter() - started)
        client_after, server_after = self._cpu()
        self.client_cpu.append(client_after - client)
        self.server_cpu.append(server_after - server)

    def medians(self) -> tuple[float, float, float]:
        """Median wall, client CPU and server CPU seconds."""
        median = statistics.median
        return median(self.wall), median(self.client_cpu), median(self.server_cpu)


def _cpu_of(processes: list[psutil.Process]) -> float:
    return sum(sum(process.cpu_times()[:2]) for process in processes)


def bench_cut(properties: dict[str, str], size: int, repeats: int, timing: Timing) -> None:
    """Time each publish of a cut of ``size`` members (after a first cut created the tables)."""
    catalog = open_catalog(properties)
    ledger = ledger_of(catalog)
    ledger.create()
    group = make_group(f"bench{size}", members=size)
    for version in range(1, repeats + 2):
        run_key, watermark = f"r{version}", Lsn(version * 100)
        ledger.pin_run(group.name, run_key, watermark)
        manifests = stage(staging_of(catalog), group.name, run_key, watermark,
                          {m.name: _frame(version) for m in group.members})
        with timing.section() if version > 1 else nullcontext():
            publish_cut(catalog, ledger, group, run_key, manifests)


def bench_single(properties: dict[str, str], workdir: Path, repeats: int, timing: Timing) -> None:
    """Time one single-table REST commit (load, overwrite snapshot with a tag, commit)."""
    catalog = open_catalog(properties)
    catalog.create_namespace_if_not_exists("single")
    table = catalog.create_table(("single", "t"), schema=_frame(0).schema)
    for version in range(1, repeats + 2):
        path = workdir / f"single-v{version}.parquet"
        pq.write_table(_frame(version), path)
        target = f"{table.location()}/data/single-v{version}.parquet"
        storage.transfer(path.as_uri(), target, catalog.properties)
        with timing.section() if version > 1 else nullcontext():
            _pyiceberg_replace(catalog.load_table(("single", "t")), target, f"tag-{version}")


def bench_upload(properties: dict[str, str], workdir: Path, megabytes: int) -> tuple[int, float]:
    """Bytes and seconds to move ``megabytes`` of 8 MB staged Parquet files into the warehouse bucket."""
    catalog = open_catalog(properties)
    catalog.create_namespace_if_not_exists("upload")
    table = catalog.create_table(("upload", "t"), schema=pa.schema([("id", pa.int64()), ("payload", pa.binary())]))
    rows = 8 * 1024  # about 8 MB per file: 1 KB of incompressible bytes per row
    files = []
    for index in range(max(1, megabytes // 8)):
        path = workdir / f"upload-{index}.parquet"
        pq.write_table(pa.table({"id": pa.array(range(rows), pa.int64()),
                                 "payload": pa.array([os.urandom(1024) for _ in range(rows)], pa.binary())}),
                       path, compression="none")
        files.append(path)
    total = sum(path.stat().st_size for path in files)
    started = time.perf_counter()
    for path in files:
        storage.transfer(path.as_uri(), f"{table.location()}/data/upload/{path.name}", catalog.properties)
    return total, time.perf_counter() - started


def main() -> None:
    """Print the figures with their goals."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--upload-mb", type=int, default=64)
    args = parse_arguments(parser, quick={"tables": 2, "repeats": 1, "upload_mb": 8})
    print(f"load average before: {' '.join(f'{load:.2f}' for load in os.getloadavg())}")
    with tempfile.TemporaryDirectory() as directory, ThrowawaySeaweed() as server:
        workdir = Path(directory)
        properties = {**server.catalog_properties(), "streambed.ledger-uri": f"sqlite:///{workdir}/ledger.db",
                      "streambed.staging-uri": (workdir / "staging").as_uri()}
        single, cuts = Timing(server), Timing(server)
        bench_single(properties, workdir, args.repeats, single)
        bench_cut(properties, args.tables, args.repeats, cuts)
        total, seconds = bench_upload(properties, workdir, args.upload_mb)
    (one, one_client, one_server), (cut, client, server_cpu) = single.medians(), cuts.medians()
    print(f"{'tables':>6}  {'cut (s)':>9}  {'one single commit (s)':>22}  {'cut/one':>8}  goal    "
          f"{'cut/(N single commits)':>22}")
    print(f"{args.tables:>6}  {cut:>9.3f}  {one:>22.3f}  {cut / one:>8.1f}  <= 2.0  {cut / (one * args.tables):>22.2f}")
    cores = os.cpu_count() or 1
    floor = (client + server_cpu) / cores
    print(f"CPU per cut: client {client:.3f} s + server {server_cpu:.3f} s; on {cores} cores a cut takes at least "
          f"{floor:.3f} s = {floor / one:.1f}x one commit (the server's CPU alone: {server_cpu / cores / one:.1f}x); "
          f"one commit: client {one_client:.3f} s + server {one_server:.3f} s")
    print(f"upload of staged files: {total / 2**20:.0f} MB in {seconds:.2f} s = {total / 2**20 / seconds:.0f} MB/s "
          "(one file after another, local disk to the local S3)")


if __name__ == "__main__":
    main()
