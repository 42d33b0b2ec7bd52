"""SQL and Python members on real Spark against the same queries run in PostgreSQL at W.

The source state at W is the model's truth, loaded into a real PostgreSQL database; the Spark
side reads only the changelogs, so both sides meet only through the data.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import psycopg
import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from airflow_provider_streambed.declarations import Mirror, PythonMember, RefreshGroup, SqlMember
from airflow_provider_streambed.exceptions import RefreshError, WatermarkError
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.refresh.job import run_job
from airflow_provider_streambed.refresh.staging_io import read_member_manifest
from tests.integration.refresh.changelog_model import ACCOUNT_SCHEMA, TableModel, account_row, random_changes
from tests.integration.refresh.jobs import capture_dir, read_staged, sorted_rows, stage_spec

pytestmark = pytest.mark.slow

BY_NAME_SQL = (
    "SELECT r.name, count(*) AS accounts, sum(a.balance) AS total "
    "FROM accounts a JOIN regions r ON a.region = r.region GROUP BY r.name"
)
TOTALS_SQL = "SELECT region, sum(balance) AS total, count(*) AS accounts FROM accounts GROUP BY region"
REGION_SCHEMA = pa.schema([pa.field("region", pa.string()), pa.field("name", pa.string())])
MODULE = "tests.integration.refresh.python_members"


def _group(*extra: SqlMember | PythonMember) -> RefreshGroup:
    members = (
        Mirror("public.accounts"),
        Mirror("public.regions"),
        SqlMember("by_name", BY_NAME_SQL, sources=("accounts", "regions")),
        PythonMember("totals", f"{MODULE}:region_totals", sources=("accounts",)),
        *extra,
    )
    return RefreshGroup("derived", "src", "cat", "ns", members)


def _load_postgres(dsn: str, accounts: TableModel, regions: TableModel) -> None:
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute("DROP TABLE IF EXISTS accounts, regions")
        connection.execute(
            "CREATE TABLE accounts (region text, id bigint, balance numeric(12,2), note text, "
            "opened timestamp, PRIMARY KEY (region, id))"
        )
        connection.execute("CREATE TABLE regions (region text PRIMARY KEY, name text)")
        with connection.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO accounts VALUES (%(region)s, %(id)s, %(balance)s, %(note)s, %(opened)s)",
                accounts.truth(),
            )
            cursor.executemany("INSERT INTO regions VALUES (%(region)s, %(name)s)", regions.truth())


def _postgres_rows(dsn: str, query: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn) as connection:
        return sorted(connection.execute(query).fetchall())


def _models(rng: random.Random) -> tuple[TableModel, TableModel]:
    accounts = TableModel("accounts", ACCOUNT_SCHEMA, ("region", "id"), toastable=("note",))
    regions = TableModel("regions", REGION_SCHEMA, ("region",))
    for ident in range(1, 30):
        accounts.insert(account_row(rng, rng.choice("ab"), ident))
    regions.insert({"region": "a", "name": "Alpha"})
    regions.insert({"region": "b", "name": "Beta"})
    return accounts, regions


def test_sql_and_python_members_match_postgres(spark: SparkSession, tmp_path: Path, pg_dsn: str) -> None:
    rng = random.Random(7)
    group = _group()
    accounts, regions = _models(rng)
    previous, prev_w = None, None
    for cut in (1, 2):
        if cut == 2:
            random_changes(accounts, rng, 20)
            regions.update(("b",), {"name": "Bravo"})
        accounts.commit()
        regions.lsn = accounts.lsn
        watermark = Lsn(accounts.lsn)
        captures = [
            model.flush(capture_dir(tmp_path, group, f"r{cut}", model.name), model.name)
            for model in (accounts, regions)
        ]
        staged = run_job(spark, stage_spec(tmp_path, group, f"r{cut}", watermark, captures, previous, prev_w, cut))
        _load_postgres(pg_dsn, accounts, regions)
        by_name = sorted(tuple(row.values()) for row in read_staged(staged["by_name"]).to_pylist())
        assert by_name == _postgres_rows(pg_dsn, BY_NAME_SQL), f"cut {cut}"
        totals = sorted_rows(read_staged(staged["totals"]), ("region",))
        expected = [(*row, cut) for row in _postgres_rows(pg_dsn, TOTALS_SQL)]
        assert [tuple(row.values()) for row in totals] == expected, f"cut {cut}"
        previous, prev_w = staged, watermark


@pytest.mark.parametrize(
    ("member", "message"),
    [
        (
            SqlMember("bad", "SELECT * FROM accounts JOIN ledger USING (id)", sources=("accounts",)),
            r"group 'derived', member 'bad': query reads table 'ledger', which is not a member of the group",
        ),
        (
            SqlMember("bad", "SELECT * FROM regions", sources=("accounts",)),
            r"member 'bad': query reads table 'regions', which is a member of the group but not among",
        ),
        (
            PythonMember("bad", f"{MODULE}:not_a_frame", sources=("accounts",)),
            r"member 'bad':.*not_a_frame returned list, expected a pyspark DataFrame",
        ),
        (
            PythonMember("bad", f"{MODULE}:missing", sources=("accounts",)),
            r"member 'bad':.*cannot import 'tests.integration.refresh.python_members:missing'",
        ),
    ],
    ids=["non-member-table", "undeclared-source", "non-dataframe", "missing-function"],
)
def test_bad_member_fails_by_name_and_keeps_the_others(
    spark: SparkSession, tmp_path: Path, member: SqlMember | PythonMember, message: str
) -> None:
    group = _group(member)
    accounts, regions = _models(random.Random(1))
    accounts.commit()
    captures = [model.flush(tmp_path / model.name, model.name) for model in (accounts, regions)]
    spec = stage_spec(tmp_path, group, "r1", Lsn(accounts.lsn), captures)
    with pytest.raises(RefreshError, match=message):
        run_job(spark, spec)
    assert read_member_manifest(spec.staging_root, "bad") is None
    for name in ("accounts", "regions", "by_name", "totals"):
        assert read_member_manifest(spec.staging_root, name) is not None, name


def test_watermark_not_after_previous_cut_is_refused(spark: SparkSession, tmp_path: Path) -> None:
    group = _group()
    accounts, regions = _models(random.Random(2))
    accounts.commit()
    captures = [model.flush(tmp_path / model.name, model.name) for model in (accounts, regions)]
    spec = stage_spec(tmp_path, group, "r1", Lsn(500), captures, prev_watermark=Lsn(900), cut_number=2)
    with pytest.raises(WatermarkError, match=r"group 'derived', run 'r1': W=0/1F4 is not after .* W=0/384"):
        run_job(spark, spec)
