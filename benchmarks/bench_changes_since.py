"""Benchmark of the change feed (issue 34): ``Cut.changes_since`` over one cut vs a full read.

A mirror of ``--rows`` rows (id, group, amount, text, timestamp; 8 Parquet files sorted by key, the
shape of a bootstrap's output) is published as cut 1 on a SQLite catalog; cut 2 is a merge-on-read
snapshot of 0.1 % updated rows (a data file of new images, a position-delete file), as the mirror
refresh publishes it. Timed side by side, median of ``--repeats``:

- ``cut2.changes_since(cut1)`` (the removed and added rows as Arrow, net);
- a full read of the table at cut 2 (``cut2.to_arrow``: pyiceberg, deletes applied);

for updates of keys drawn at random from the whole table and of keys drawn from its newest 1 %
(hot rows, the common OLTP shape), each with position deletes that carry the deleted rows and
without (Iceberg's ``row`` column, written by the in-process merge's own writer, as the merges do under
``REPLICA IDENTITY FULL``). Goal: the feed takes <= 5 % of the full read. The feed reads the
added files whole and, for the removed rows, the delete file's rows when it has them, otherwise
the row groups of the older files that hold them (Parquet gives no cheaper way to a row than its
pages): random updates without rows cost a read of every row group, and hot updates of the one or
two that hold the newest keys.

Run: ``.venv/bin/python -m benchmarks.bench_changes_since [--rows 10000000] [--repeats 3] [--quick]``
(default 2,000,000 rows; ``STREAMBED_BENCH_ROWS`` sets the default too).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from airflow_provider_streambed import Mirror, RefreshGroup
from airflow_provider_streambed.catalog import open_catalog
from airflow_provider_streambed.ledger import Ledger
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.publish import publish_cut
from airflow_provider_streambed.read import Cut, CutReader
from airflow_provider_streambed.read.snapshot_files import plan_snapshot_files
from airflow_provider_streambed.refresh.mirrors.position_delete_rows import identified
from benchmarks.quick import parse_arguments
from tests.integration.publish.helpers import stage, stage_delta

GROUP = RefreshGroup("bench", "src", "cat", "bench", (Mirror("public.facts"),))
FILES = 8
FRACTION, GOAL = 0.001, 0.05


def facts(ids: np.ndarray, note: str | None = None) -> pa.Table:
    """Rows of the mirror for keys ``ids`` (``note`` for updated rows)."""
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "grp": pa.array(ids % 100, pa.int32()),
        "amount": pa.array(ids * 7 % 100_000, pa.int32()).cast(pa.decimal128(14, 2)),
        "note": pa.array([note] * len(ids), pa.string()) if note else pc.binary_join_element_wise(
            "note-", pa.array(ids, pa.int64()).cast(pa.string()), ""),
        "at": pa.array(ids * 1000, pa.int64()).cast(pa.timestamp("us", tz="UTC")),
    })


def sqlite_catalog(work: str) -> tuple[dict[str, str], Ledger]:
    """The properties of a SQLite catalog with its warehouse under ``work``, and its ledger (created)."""
    props = {"uri": f"sqlite:///{work}/catalog.db", "warehouse": Path(work, "warehouse").as_uri()}
    ledger = Ledger(props["uri"])
    ledger.create()
    return props, ledger


def median_seconds(action: Callable[[], object], repeats: int) -> float:
    """The median wall time of ``action`` over ``repeats`` runs."""
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def publish_updates(catalog_props: dict[str, str], ledger: Ledger, rows: int, hot: bool, images: bool,
                    run: int) -> tuple[Cut, Cut]:
    """Cut 1 (the whole table) and cut 2 (0.1 % of the keys updated, merged on read; with
    ``images``, the position deletes carry the deleted rows)."""
    catalog = open_catalog(catalog_props)
    group = RefreshGroup(f"bench{run}", "src", "cat", f"bench{run}", GROUP.members)
    warehouse = catalog_props["warehouse"]
    ledger.pin_run(group.name, "r1", Lsn(100))
    publish_cut(catalog, ledger, group, "r1", stage(warehouse, group.name, "r1", Lsn(100),
                                                   {"facts": facts(np.arange(rows))}, files_per_member=FILES))
    reader = CutReader(catalog, group, ledger)
    first = reader.latest()
    files = sorted(plan_snapshot_files(first.table("facts"), first.member("facts").snapshot_id).data)
    count = int(rows * FRACTION)
    low = rows - max(count, rows // 100) if hot else 0
    changed = np.sort(low + np.random.default_rng(run).choice(rows - low, size=count, replace=False))
    step = -(-rows // FILES)
    deleted = [(files[int(key) // step], int(key) % step) for key in changed]
    ledger.pin_run(group.name, "r2", Lsn(200))
    ids = {field.name: field.field_id for field in first.table("facts").schema().fields}
    old = facts(changed)
    manifest = stage_delta(warehouse, group.name, "r2", Lsn(200), "facts", facts(changed, "updated"), deleted,
                           first.member("facts").snapshot_id, old.cast(identified(old.schema, ids)) if images else None)
    publish_cut(catalog, ledger, group, "r2", {"facts": manifest})
    return first, reader.latest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=int(os.environ.get("STREAMBED_BENCH_ROWS", 2_000_000)))
    parser.add_argument("--repeats", type=int, default=3)
    args = parse_arguments(parser, quick={"rows": 10_000, "repeats": 1})
    with tempfile.TemporaryDirectory(prefix="bench-changes-") as work:
        props, ledger = sqlite_catalog(work)
        print(f"# changes_since over one cut of {FRACTION:.1%} updates, {args.rows:,} rows in {FILES} files "
              f"(median of {args.repeats}; load {os.getloadavg()[0]:.1f})")
        print(f"{'updates':>32} {'changed':>8} {'full read s':>12} {'changes_since s':>16} {'/ full':>8} {'goal':>6}")
        shapes = {"random keys": (False, False), "hot (newest 1 % of keys)": (True, False),
                  "random keys, rows in deletes": (False, True), "hot, rows in deletes": (True, True)}
        for run, (label, (hot, images)) in enumerate(shapes.items()):
            earlier, later = publish_updates(props, ledger, args.rows, hot, images, run)
            full = median_seconds(lambda: later.to_arrow("facts"), args.repeats)  # noqa: B023  # called at once
            feed = median_seconds(lambda: later.changes_since(earlier, ledger), args.repeats)  # noqa: B023
            changes = later.changes_since(earlier, ledger)["facts"]
            assert changes.method == "snapshots" and changes.added.num_rows == int(args.rows * FRACTION)
            print(f"{label:>32} {changes.added.num_rows:>8,} {full:>12.2f} {feed:>16.3f} {feed / full:>8.1%} "
                  f"{GOAL:>6.0%}")


if __name__ == "__main__":
    main()
