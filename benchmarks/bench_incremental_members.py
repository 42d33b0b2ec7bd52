"""Benchmark of incremental derived members (issue 34): a GROUP BY aggregate updated vs recomputed.

A mirror ``facts`` of ``--rows`` rows (id, grp, amount, note, at; 8 Parquet files, the shape of a
bootstrap's output) has four derived members: three giving, per ``grp`` (100 groups), its rows,
amounts counted and their sum: an incremental PythonMember
(``tests.integration.refresh.python_members.totals``: the previous output plus the signed sums of
the changes), a SqlMember ``grp_stats``, ``SELECT grp, COUNT(*), COUNT(amount), SUM(amount) FROM
facts GROUP BY grp``, and ``grp_means``, the same with ``AVG(amount)`` (both updated from the
changes alone: ``grp_stats`` in the worker's process, ``sql_delta_local``; ``grp_means`` by Spark,
which divides a decimal's mean by rules of its own); and a SqlMember ``region_stats`` over a key
join, ``facts JOIN dims ON grp = dims.id GROUP BY grp, dims.region`` with the same aggregates
(``dims``: a carried mirror of 100 rows keyed by ``id``, a region each; updated from the changes
of ``facts`` joined to ``dims``).
Each line names the member; for a SQL member the next says how its last incremental run
computed it (its staged reason: in this process, or by Spark and how). Their previous outputs are
computed once over the mirror; then the mirror is refreshed after 0.1 % and 1 % updated rows
(random keys, each moved to another group with a NULL amount: every group touched), and after
as many inserted rows (an append-mostly table, all in one group), staged merge-on-read as a
refresh stages it, and each member computed on top of that, timed side by side in one
in-process ``local[2]`` Spark session warmed up by one round first (no JVM start in any figure),
median of ``--repeats``:

- full: the member recomputed whole over the mirror at W, and its output staged;
- incremental: the member computed as the refresh job computes it from its previous output and
  the mirror's changes this run, and its output staged.

Both outputs are compared (they must be equal); the time to read the removed rows alone is
printed beside (random updates touch every row group), and so is the floor of any run of a
member: staging its 100-row output alone, by a Spark write (a job and its commit) and collected
into the process and written there, as a small output is (``members.collected``). Goals:
<= 10 % (0.1 %) and <= 20 % (1 %) of full.

Both computes take the query's shape recorded with the previous output, as a run does. With
``--connect`` everything runs on a local Spark Connect server (``local[2]``, warmed up the same
way) instead, as the refresh runs with a ``spark_connect`` connection; the shape was then read once,
by a local Spark, when the previous outputs were computed.

With ``--full-identity`` the updates are captured as under ``REPLICA IDENTITY FULL`` (each after a
delete of its whole old row): the mirror's position deletes then carry the deleted rows, and the
members take the removed rows from there instead of reading every row group.

Run: ``.venv/bin/python -m benchmarks.bench_incremental_members [--rows 10000000] [--repeats 3]
[--members grp_stats] [--connect] [--full-identity] [--fractions 0.001] [--quick]`` (default 1,000,000
rows, every member, each fraction).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from contextlib import ExitStack
from dataclasses import replace
from functools import partial
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession

from airflow_provider_streambed import Mirror, PythonMember, RefreshGroup, SqlMember
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.refresh.derived.incremental import incremental_basis
from airflow_provider_streambed.refresh.derived.incremental_sql import stage_sql_member
from airflow_provider_streambed.refresh.derived.members import CutContext, compute_python_member
from airflow_provider_streambed.refresh.derived.sources import SourceState, removed_rows
from airflow_provider_streambed.refresh.spark.connect_server import ConnectServer
from airflow_provider_streambed.refresh.spark.connect_variables import connect_mode
from airflow_provider_streambed.refresh.spark.session import REQUIRED_CONF
from airflow_provider_streambed.staging import (
    JobSpec,
    MemberManifest,
    SnapshotFiles,
    TableCapture,
    stage_member_output,
)
from airflow_provider_streambed.staging.members import read_member_manifest
from airflow_provider_streambed.testing.postgres import free_port
from airflow_provider_streambed.testing.spark import local_spark_session
from benchmarks.bench_changes_since import median_seconds
from benchmarks.bench_merge_on_read import refresh, write_changelog, write_table
from benchmarks.quick import parse_arguments
from tests.integration.refresh.python_members import totals

PYTHON = PythonMember("grp_totals", "benchmarks.bench_incremental_members:grp_totals", ("facts",), incremental=True)
SQL = SqlMember("grp_stats", "SELECT grp, COUNT(*) AS n, COUNT(amount) AS counted, SUM(amount) AS total "
                "FROM facts GROUP BY grp", ("facts",), incremental=True)
MEANS = SqlMember("grp_means", "SELECT grp, COUNT(*) AS n, COUNT(amount) AS counted, SUM(amount) AS total, "
                  "AVG(amount) AS mean FROM facts GROUP BY grp", ("facts",), incremental=True)
JOIN = SqlMember("region_stats", "SELECT f.grp, d.region, COUNT(*) AS n, COUNT(f.amount) AS counted, "
                 "SUM(f.amount) AS total FROM facts f JOIN dims d ON f.grp = d.id GROUP BY f.grp, d.region",
                 ("facts", "dims"), incremental=True)
GROUP = RefreshGroup("bench", "src", "cat", "bench",
                     (Mirror("public.facts"), Mirror("public.dims"), PYTHON, SQL, MEANS, JOIN))
MEMBERS = (PYTHON, SQL, MEANS, JOIN)
GOALS = {0.001: 0.10, 0.01: 0.20}


def grp_totals(spark: SparkSession, inputs: dict[str, DataFrame], cut: CutContext) -> DataFrame:
    """Rows, amounts counted and their sum per ``grp`` of ``facts``; updated when the run allows it."""
    return totals(inputs, cut, "facts", "grp", "amount")


def compute(spark: SparkSession, spec: JobSpec, member: PythonMember | SqlMember, sources: dict[str, SourceState],
            root: Path) -> MemberManifest:
    """The member computed and staged under ``root`` as the refresh job does: from its previous
    output when ``spec`` lists it as incremental, else whole."""
    if isinstance(member, SqlMember):
        return stage_sql_member(spark, replace(spec, staging_root=root.as_uri()), GROUP, member,
                                {name: sources[name] for name in member.sources})
    source = sources["facts"]
    context = CutContext(GROUP, spec.watermark, spec.prev_watermark, spec.cut_number)
    if member.name in spec.incremental:
        basis = incremental_basis(spark, spec, member.name, {"facts": source})
        assert not isinstance(basis, str), basis
        context = CutContext(GROUP, spec.watermark, spec.prev_watermark, spec.cut_number, *basis)
    frame = compute_python_member(spark, GROUP, member, {"facts": source.files}, context)
    return stage_member_output(frame, root.as_uri(), member.name, spec.watermark)


def rows_of(spark: SparkSession, root: Path, member: str) -> list[tuple[object, ...]]:
    """The member's output staged under ``root``, sorted."""
    manifest = read_member_manifest(root.as_uri(), member)
    assert manifest is not None
    return sorted((tuple(row) for row in spark.read.parquet(*manifest.files).collect()), key=repr)


def stage_alone(output: DataFrame, root: str, member: str, watermark: Lsn, collect: bool) -> None:
    """Stage ``output`` as a member's, by a Spark write or (``collect``) from this process."""
    stage_member_output(output.toArrow() if collect else output, root, member, watermark)


def write_inserts(rows: int, fraction: float, lsn: int, path: Path) -> TableCapture:
    """A changelog inserting ``fraction`` x ``rows`` new keys (after the table's), the shape of an
    append-mostly table (the transfers of the bank example)."""
    capture = write_changelog(rows, fraction, lsn, path, seed=lsn)
    table = pq.read_table(path)
    table = table.set_column(0, "id", pa.array(np.arange(rows, rows + table.num_rows), pa.int64()))
    table = table.set_column(table.schema.get_field_index("_op"), "_op", pa.array(["I"] * table.num_rows))
    pq.write_table(table, path)
    return capture


def write_dims(spark: SparkSession, directory: Path) -> SourceState:
    """The carried dimension ``dims``: 100 rows keyed by ``id`` (each ``grp`` of ``facts``), a region each."""
    spark.range(100).selectExpr("cast(id AS int) AS id", "concat('r', id) AS region").coalesce(1) \
        .write.parquet(directory.as_uri())
    return SourceState(SnapshotFiles(tuple(path.as_uri() for path in directory.glob("*.parquet"))), None, key=("id",))


def bench(spark: SparkSession, work: Path, rows: int, base: SnapshotFiles, dims: SourceState,
          previous: dict[str, MemberManifest], fraction: float, repeats: int, inserts: bool = False,
          full_identity: bool = False) -> None:
    """A line per member of ``previous`` (the Python, the SQL and the SQL join member), after
    ``fraction`` changed rows (updates of random keys, with their old rows when ``full_identity``,
    or ``inserts``)."""
    lsn = 1000 + int(fraction * 1e6) + (500 if inserts else 0)
    path = work / f"changes-{lsn}" / "c.parquet"
    capture = write_inserts(rows, fraction, lsn, path) if inserts else write_changelog(
        rows, fraction, lsn, path, lsn, base=base if full_identity else None)
    staged, _ = refresh(spark, base, capture, work / f"mirror-{lsn}", lsn)
    whole_spec = JobSpec(GROUP.to_dict(), f"r{lsn}", Lsn(lsn), Lsn(1), 2, (work / "unused").as_uri(), "",
                         previous_files={name: manifest.files for name, manifest in previous.items()},
                         shapes={name: manifest.shape for name, manifest in previous.items() if manifest.shape})
    spec = replace(whole_spec, incremental=tuple(previous))
    sources = {"facts": SourceState(base, staged), "dims": dims}
    start = time.perf_counter()
    removed_rows(base, staged.delete_files, None)
    read_removed = time.perf_counter() - start
    shape = "inserted" if inserts else f"updated (random keys{', REPLICA IDENTITY FULL' if full_identity else ''})"
    print(f"{fraction:>6.1%} rows {shape}: {staged.row_count:,} new rows, {staged.deleted_rows:,} deleted "
          f"(reading the removed rows: {read_removed:.2f} s)")
    name = next(iter(previous))
    output = spark.read.parquet(*previous[name].files)
    floors = [median_seconds(partial(stage_alone, output, (work / "floor").as_uri(), name, Lsn(lsn), collect), repeats)
              for collect in (False, True)]
    print(f"    floor: staging {name}'s {output.count()} rows alone takes {floors[0]:.2f} s by a Spark write, "
          f"{floors[1]:.2f} s collected (as a small output is)")
    for member in (member for member in MEMBERS if member.name in previous):
        full_root, incremental_root = work / f"full-{lsn}-{member.name}", work / f"incremental-{lsn}-{member.name}"
        full = median_seconds(partial(compute, spark, whole_spec, member, sources, full_root), repeats)
        updated = median_seconds(partial(compute, spark, spec, member, sources, incremental_root), repeats)
        whole, incremental = (rows_of(spark, root, member.name) for root in (full_root, incremental_root))
        ratio, goal = updated / full, GOALS[fraction]
        staged_as = read_member_manifest(incremental_root.as_uri(), member.name)  # the last repeat's
        print(f"    {member.name:<12} full {full:.2f} s, incremental {updated:.2f} s = {ratio:.1%} of full "
              f"(goal <= {goal:.0%}: {'met' if ratio <= goal else 'NOT met'}); "
              f"outputs {'equal' if whole == incremental else 'DIFFER'} ({len(whole)} groups)")
        if isinstance(member, SqlMember):
            print(f"    {'':<12} computed: {(staged_as.reason or 'whole') if staged_as is not None else 'not staged'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3, help="runs per figure (the median is printed)")
    parser.add_argument("--members", nargs="+", choices=[member.name for member in MEMBERS],
                        default=[member.name for member in MEMBERS], help="the members to time (default: all)")
    parser.add_argument("--connect", action="store_true",
                        help="run everything on a local Spark Connect server (local[2]) instead of in-process")
    parser.add_argument("--full-identity", action="store_true",
                        help="updates captured as under REPLICA IDENTITY FULL: the deletes carry the removed rows")
    parser.add_argument("--fractions", type=float, nargs="+", choices=list(GOALS), default=list(GOALS),
                        help="the shares of rows changed (default: each that has a goal)")
    parser.add_argument("--warm-up", action=argparse.BooleanOptionalAction, default=True,
                        help="one untimed round first (JIT, caches)")
    arguments = parse_arguments(parser, quick={"rows": 10_000, "repeats": 1, "fractions": [0.001], "warm_up": False})
    with tempfile.TemporaryDirectory(prefix="bench-incremental-") as directory, \
            connect_mode(), ExitStack() as stack:
        work = Path(directory)
        if arguments.connect:
            remote = stack.enter_context(ConnectServer(port=free_port(), state_dir=work / "connect").running())
            spark = SparkSession.builder.remote(remote).create()
            for key, value in REQUIRED_CONF.items():
                spark.conf.set(key, value)
        else:
            spark = local_spark_session("bench-incremental-members")
        stack.callback(spark.stop)
        base = write_table(spark, arguments.rows, work / "base")
        first = JobSpec(GROUP.to_dict(), "r0", Lsn(1), None, 1, (work / "unused").as_uri(), "")
        dims = write_dims(spark, work / "dims")
        sources = {"facts": SourceState(base, None), "dims": dims}
        previous = {member.name: compute(spark, first, member, sources, work / "previous")
                    for member in MEMBERS if member.name in arguments.members}
        if arguments.warm_up:
            bench(spark, work, arguments.rows, base, dims, previous, 0.001, 1)
        where = "a warm Spark Connect server (local[2])" if arguments.connect else "in-process local[2]"
        print(f"\n## GROUP BY aggregate member over a mirror of {arguments.rows:,} rows, {where}")
        for inserts in (False, True):
            for fraction in arguments.fractions:
                bench(spark, work, arguments.rows, base, dims, previous, fraction, arguments.repeats, inserts,
                      arguments.full_identity)


if __name__ == "__main__":
    main()
