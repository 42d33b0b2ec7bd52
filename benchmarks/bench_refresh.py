"""Benchmark of the refresh step on Spark local[2]; prints figures and ratios (no asserts).

1. Groups of 1, 5 and 10 members (one mirror + SQL members over it): wall time of one
   spark-submit application per run vs one application per member.
2. Per-run fixed cost vs rows: one-mirror runs of growing size through spark-submit.

The refresh of a large mirror after a few changes (merge-on-read) is in ``bench_merge_on_read``.

Run: ``.venv/bin/python -m benchmarks.bench_refresh [--sizes 1 5 10] [--rows 10000] [--quick]``.
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.member_declarations import Member, Mirror, SqlMember
from airflow_provider_streambed.refresh import run_local_spark_submit, write_job_spec
from airflow_provider_streambed.staging import JobSpec, TableCapture
from benchmarks.quick import parse_arguments
from tests.integration.refresh.jobs import capture_dir, stage_spec

logger = logging.getLogger(__name__)

COLUMNS = ("id", "grp", "amount", "at")


def changelog(ids: np.ndarray, lsn: int, ops: str | np.ndarray, seed: int) -> pa.Table:
    """Changelog rows for ``ids`` at commit LSN ``lsn`` (one transaction, ``_seq`` in order)."""
    rng = np.random.default_rng(seed)
    count = len(ids)
    amounts = pc.cast(pa.array(rng.integers(-(10**8), 10**8, count)), pa.decimal128(19, 0))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "grp": pa.array(rng.integers(0, 100, count), pa.int32()),
            "amount": pc.cast(amounts, pa.decimal128(14, 2)),
            "at": pa.array(rng.integers(0, 10**15, count), pa.int64()).cast(pa.timestamp("us")),
            "_commit_lsn": pa.array(np.full(count, lsn), pa.int64()),
            "_xid": pa.array(np.full(count, lsn), pa.int64()),
            "_seq": pa.array(np.arange(count), pa.int32()),
            "_op": pa.array(np.full(count, ops) if isinstance(ops, str) else ops, pa.string()),
        }
    )


def make_spec(warehouse: Path, group: RefreshGroup, run_key: str, rows: pa.Table, watermark: int) -> JobSpec:
    """A job spec over a staged changelog ``rows`` of ``facts`` (a first cut)."""
    directory = capture_dir(warehouse, group, run_key, "facts")
    directory.mkdir(parents=True, exist_ok=True)
    segment = directory / "segment-0000.parquet"
    pq.write_table(rows, segment)
    capture = TableCapture("facts", "public.facts", COLUMNS, ("id",), (segment.as_uri(),), len(rows))
    return stage_spec(warehouse, group, run_key, Lsn(watermark), [capture])


def group_of(size: int) -> RefreshGroup:
    """One mirror plus ``size - 1`` SQL members aggregating it."""
    members: list[Member] = [Mirror("public.facts")]
    members += [
        SqlMember(
            f"agg{index}",
            f"SELECT grp, sum(amount) AS total FROM facts WHERE grp % {index + 1} = 0 GROUP BY grp",
            ("facts",),
        )
        for index in range(1, size)
    ]
    return RefreshGroup(f"bench{size}", "src", "cat", "ns", tuple(members))


def timed_submit(spec: JobSpec, per_member: bool) -> float:
    spec_uri = write_job_spec(spec)
    start = time.perf_counter()
    if per_member:
        for member in RefreshGroup.from_dict(spec.group).topological_members():
            run_local_spark_submit(spec_uri, members=[member.name])
    else:
        run_local_spark_submit(spec_uri)
    return time.perf_counter() - start


def bench_application_modes(warehouse: Path, sizes: list[int], rows: int) -> None:
    print(f"\n## One application per run vs per member ({rows} mirror rows)")
    print(f"{'members':>8} {'per run s':>10} {'per member s':>13} {'ratio':>6}")
    data = changelog(np.arange(rows), 0, "I", 1)
    for size in sizes:
        group = group_of(size)
        single = timed_submit(make_spec(warehouse, group, "single", data, 100), per_member=False)
        each = timed_submit(make_spec(warehouse, group, "each", data, 100), per_member=True)
        print(f"{size:>8} {single:>10.1f} {each:>13.1f} {each / single:>6.2f}")


def bench_fixed_cost(warehouse: Path, row_counts: list[int]) -> None:
    print("\n## Per-run fixed cost vs rows (1 mirror, one application)")
    print(f"{'rows':>10} {'wall s':>8} {'over smallest s':>16}")
    group = group_of(1)
    base = None
    for rows in row_counts:
        wall = timed_submit(
            make_spec(warehouse, group, f"rows{rows}", changelog(np.arange(rows), 0, "I", 2), 100), False
        )
        base = wall if base is None else base
        print(f"{rows:>10} {wall:>8.1f} {wall - base:>16.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 5, 10], help="members per group")
    parser.add_argument("--rows", type=int, default=10_000, help="mirror rows of the groups")
    parser.add_argument("--row-counts", type=int, nargs="+", default=[1_000, 1_000_000],
                        help="mirror rows of the one-mirror runs (per-run fixed cost)")
    arguments = parse_arguments(parser, quick={"sizes": [2], "rows": 1_000, "row_counts": [1_000]})
    with tempfile.TemporaryDirectory(prefix="bench-refresh-") as directory:
        warehouse = Path(directory)
        bench_application_modes(warehouse, arguments.sizes, arguments.rows)
        bench_fixed_cost(warehouse, arguments.row_counts)


if __name__ == "__main__":
    main()
