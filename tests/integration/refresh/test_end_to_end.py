"""Refresh on the real capture step and real PostgreSQL, over several published cuts.

Each cut: random inserts, updates (some leaving a TOASTed value unchanged), deletes, key updates
and a truncate in PostgreSQL; ``capture_run`` pins W; the spec is built from the ledger and
catalog (previous cut's data and delete files planned by pyiceberg); the job runs on real Spark
(the mirror merge-on-read); ``publish_cut`` publishes; every reader of the cut (pyiceberg, the
tag scanned by plain pyiceberg, DuckDB's views and ``iceberg_scan``, Spark) is compared with
PostgreSQL's state, which no writer touches between the pin and the comparison; then
``advance_slot`` prepares the next cut.
"""

from __future__ import annotations

import random
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import psycopg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog import Catalog
from pyspark.sql import SparkSession

from airflow_provider_streambed.capture.run import capture_run
from airflow_provider_streambed.capture.slot import advance_slot
from airflow_provider_streambed.catalog import open_catalog
from airflow_provider_streambed.ledger import Ledger, cut_tag
from airflow_provider_streambed.publish.cut import publish_cut
from airflow_provider_streambed.read import Cut, CutReader, load_duckdb_iceberg
from airflow_provider_streambed.read.snapshot_files import plan_snapshot_files
from airflow_provider_streambed.refresh import build_job_spec, collect_member_manifests
from airflow_provider_streambed.refresh.spark.job import run_job
from airflow_provider_streambed.staging import OP, TOAST_MARKER_PREFIX, CaptureManifest, MemberManifest
from tests.integration.refresh.test_members import BY_NAME_SQL, TOTALS_SQL, derived_group

pytestmark = pytest.mark.slow

GROUP = derived_group("e2e")
SCHEMA = """
CREATE TABLE accounts (region text, id bigint, balance numeric(12,2), note text, opened timestamp,
                       PRIMARY KEY (region, id));
ALTER TABLE accounts ALTER COLUMN note SET STORAGE EXTERNAL;
CREATE TABLE regions (region text PRIMARY KEY, name text);
INSERT INTO regions VALUES ('a', 'Alpha'), ('b', 'Beta');
"""


def _big_note(rng: random.Random) -> str | None:
    return rng.choice([None, "short", f"{rng.getrandbits(128):032x}" * 200])  # 6.4 kB: stored out of line


def _write(conn: psycopg.Connection[Any], rng: random.Random, transactions: int, truncate: bool) -> None:
    for _ in range(transactions):
        with conn.transaction():
            for _ in range(rng.randint(1, 4)):
                _random_statement(conn, rng)
    if truncate:
        conn.execute("TRUNCATE accounts")
        for _ in range(5):
            _random_statement(conn, rng, insert_only=True)


def _random_statement(conn: psycopg.Connection[Any], rng: random.Random, insert_only: bool = False) -> None:
    choice = 0.0 if insert_only else rng.random()
    region = rng.choice("ab")
    if choice < 0.35:
        conn.execute(
            "INSERT INTO accounts SELECT %s, coalesce(max(id), 0) + 1, %s, %s, "
            "timestamp '2024-01-01' + %s * interval '1 microsecond' FROM accounts",
            (region, Decimal(rng.randint(-(10**6), 10**6)) / 100, _big_note(rng), rng.randint(0, 10**12)),
        )
    elif choice < 0.65:  # the note is not touched: an unchanged TOASTed value when it is big
        conn.execute(
            "UPDATE accounts SET balance = balance + 1 WHERE (region, id) IN "
            "(SELECT region, id FROM accounts ORDER BY random() LIMIT 2)"
        )
    elif choice < 0.75:
        conn.execute(
            "UPDATE accounts SET note = %s WHERE id = (SELECT id FROM accounts ORDER BY random() LIMIT 1)",
            (_big_note(rng),),
        )
    elif choice < 0.9:
        conn.execute("DELETE FROM accounts WHERE id = (SELECT id FROM accounts ORDER BY random() LIMIT 1)")
    else:  # key update, on rows without an out-of-line note (see capture/extract.py)
        conn.execute(
            "UPDATE accounts SET id = (SELECT max(id) + 1 FROM accounts), region = %s WHERE (region, id) = "
            "(SELECT region, id FROM accounts WHERE coalesce(length(note), 0) < 100 ORDER BY random() LIMIT 1)",
            (region,),
        )


def _rows(conn: psycopg.Connection[Any], query: str) -> list[tuple[Any, ...]]:
    return sorted(conn.execute(query).fetchall())


def _sorted(table: pa.Table) -> list[tuple[Any, ...]]:
    return sorted(tuple(row.values()) for row in table.to_pylist())


def _every_reader(cut: Cut, catalog: Catalog, spark: SparkSession, member: str) -> dict[str, list[tuple[Any, ...]]]:
    """The member's rows at the cut as each reader returns them."""
    tag = cut_tag(cut.group, cut.cut_id)
    location = cut.member(member).metadata_location
    with duckdb.connect() as con:
        cut.to_duckdb(con)
        views = _sorted(con.execute(f'SELECT * FROM "{member}"').to_arrow_table())
        load_duckdb_iceberg(con)
        scan = _sorted(con.execute(f"SELECT * FROM iceberg_scan('{location}')").to_arrow_table())
    return {
        "Cut.to_arrow": _sorted(cut.to_arrow(member)),
        "pyiceberg tag": _sorted(catalog.load_table(cut.member(member).table_identifier).scan()
                                 .use_ref(tag).to_arrow()),
        "Cut.to_duckdb": views,
        "duckdb iceberg_scan": scan,
        "Cut.to_spark": sorted(tuple(row) for row in cut.to_spark(spark)[member].collect()),
    }


def _check_files_kept(cut: Cut, previous: Cut | None, staged: MemberManifest) -> None:
    """An incremental mirror's snapshot keeps every previous file, adds the staged ones, and its
    deletes name only previous files."""
    if previous is None or not staged.incremental:
        return
    before = plan_snapshot_files(previous.table("accounts"), previous.member("accounts").snapshot_id)
    after = plan_snapshot_files(cut.table("accounts"), cut.member("accounts").snapshot_id)
    assert set(before.data) <= set(after.data), "previous files must stay in the snapshot"
    assert len(after.data) == len(before.data) + len(staged.files)
    named = {path for uri in after.deletes for path in pq.read_table(uri.removeprefix("file://"))
             .column("file_path").to_pylist()}
    assert named <= set(before.data)


def _count_changes(manifest: CaptureManifest, seen: Counter[str]) -> None:
    """Count the accounts changelog's ops and unchanged-TOAST markers (the test must exercise them)."""
    files = next(table.files for table in manifest.tables if table.member == "accounts")
    rows = pa.concat_tables([pq.read_table(uri.removeprefix("file://")) for uri in files], promote_options="default")
    seen.update(rows[OP].to_pylist())
    seen["toast"] += sum(rows[TOAST_MARKER_PREFIX + "note"].to_pylist())


def test_refresh_matches_postgres_at_w_over_published_cuts(
    spark: SparkSession, tmp_path: Path, pg_dsn: str, sqlite_catalog_uri: str
) -> None:
    rng = random.Random(11)
    catalog = open_catalog({"uri": sqlite_catalog_uri, "warehouse": (tmp_path / "warehouse").as_uri()})
    ledger = Ledger(catalog.engine)  # type: ignore[attr-defined]  # SqlCatalog has an engine
    ledger.create()
    seen: Counter[str] = Counter()
    reasons = []
    reader = CutReader(catalog, GROUP, ledger)
    previous: Cut | None = None
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(SCHEMA)
        _write(conn, rng, 25, truncate=False)
        for cut in range(1, 7):
            if cut > 1:
                _write(conn, rng, 25, truncate=cut == 4)
            run_key = f"run{cut}"
            captured = capture_run(conn, GROUP, ledger, run_key, (tmp_path / "warehouse").as_uri())
            _count_changes(captured.manifest, seen)
            # small tables: their deletes pass the compaction threshold at once; the last run compacts both
            spec = build_job_spec(GROUP, catalog, ledger, captured.manifest_uri, run_key, "all" if cut == 6 else "none")
            assert set(spec.rewrite) == ({"accounts", "regions"} if cut == 6 else set())
            assert spec.cut_number == cut
            assert bool(spec.previous_files) == (cut > 1)
            assert ("accounts" in spec.previous_deletes) == (cut > 2 and reasons[-1] == "merge-on-read"), reasons
            run_job(spark, spec)
            staged = collect_member_manifests(spec)
            reasons.append(staged["accounts"].reason)
            published = publish_cut(catalog, ledger, GROUP, run_key, staged)
            assert published.cut_id == cut
            expected = {
                "accounts": _rows(conn, "SELECT * FROM accounts"),
                "regions": _rows(conn, "SELECT * FROM regions"),
                "by_name": _rows(conn, BY_NAME_SQL),
                "totals": [(*row, cut) for row in _rows(conn, TOTALS_SQL)],
            }
            current = reader.get(cut)
            for member, rows in expected.items():
                for name, found in _every_reader(current, catalog, spark, member).items():
                    assert found == rows, f"cut {cut}, member {member}, reader {name}: {found} != {rows}"
            assert current.row_counts()["accounts"] == len(expected["accounts"])
            _check_files_kept(current, previous, staged["accounts"])
            previous = current
            advance_slot(conn, GROUP, captured.watermark)
            conn.execute("UPDATE regions SET name = name || '+' WHERE region = %s", (rng.choice("ab"),))
    assert seen["T"] == 1 and seen["toast"] > 0 and seen["D"] > 0 and seen["U"] > 0, seen
    adopted = "bootstrap copy adopted, changes merged on read"
    assert reasons[:5] == [adopted, "merge-on-read", "merge-on-read", "truncated", "merge-on-read"], reasons
    assert reasons[5].startswith("compaction: ") and not current.table("accounts").scan().plan_files()[0].delete_files
