"""Bad derived members and bad specs fail with clear errors; the other members stay staged.

(SQL and Python members against the same queries in PostgreSQL at W: ``test_end_to_end.py``.)
"""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.exceptions import InvalidWatermarkError, RefreshError, is_final
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.member_declarations import Mirror, PythonMember, SqlMember
from airflow_provider_streambed.refresh.spark.job import run_job
from airflow_provider_streambed.staging import SnapshotFiles
from airflow_provider_streambed.staging.members import read_member_manifest
from tests.integration.refresh.changelog_model import ACCOUNT_SCHEMA, TableModel, account_row
from tests.integration.refresh.jobs import read_files, stage_spec

pytestmark = pytest.mark.slow

BY_NAME_SQL = (
    "SELECT r.name, count(*) AS accounts, sum(a.balance) AS total "
    "FROM accounts a JOIN regions r ON a.region = r.region GROUP BY r.name"
)
TOTALS_SQL = "SELECT region, sum(balance) AS total, count(*) AS accounts FROM accounts GROUP BY region"
REGION_SCHEMA = pa.schema([pa.field("region", pa.string()), pa.field("name", pa.string())])
MODULE = "tests.integration.refresh.python_members"


def derived_group(name: str, *extra: SqlMember | PythonMember) -> RefreshGroup:
    """Mirrors ``accounts`` and ``regions``, SQL member ``by_name``, Python member ``totals``, then ``extra``."""
    members = (
        Mirror("public.accounts"),
        Mirror("public.regions"),
        SqlMember("by_name", BY_NAME_SQL, sources=("accounts", "regions")),
        PythonMember("totals", f"{MODULE}:region_totals", sources=("accounts",)),
        *extra,
    )
    return RefreshGroup(name, "src", "cat", "ns", members)


def region_models(rng: random.Random, accounts_count: int = 29) -> tuple[TableModel, TableModel]:
    """Models of ``accounts`` (regions a and b, a TOASTable note) and ``regions``, with their first rows."""
    accounts = TableModel("accounts", ACCOUNT_SCHEMA, ("region", "id"), toastable=("note",))
    regions = TableModel("regions", REGION_SCHEMA, ("region",))
    for ident in range(1, accounts_count + 1):
        accounts.insert(account_row(rng, rng.choice("ab"), ident))
    regions.insert({"region": "a", "name": "Alpha"})
    regions.insert({"region": "b", "name": "Beta"})
    return accounts, regions


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
        (
            SqlMember("bad", "SELECT no_such_column FROM accounts", sources=("accounts",)),
            r"member 'bad':.*UNRESOLVED_COLUMN.*no_such_column",
        ),
        (
            SqlMember("bad", "SELEC region FROM accounts", sources=("accounts",)),
            r"member 'bad':.*PARSE_SYNTAX_ERROR.*'SELEC'",
        ),
        (
            PythonMember("bad", f"{MODULE}:raises", sources=("accounts",)),
            r"member 'bad':.*ValueError: no region z in cut 1",
        ),
    ],
    ids=["non-member-table", "undeclared-source", "non-dataframe", "missing-function", "unknown-column",
         "syntax-error", "member-raises"],
)
def test_bad_member_fails_by_name_and_keeps_the_others(
    spark: SparkSession, tmp_path: Path, member: SqlMember | PythonMember, message: str
) -> None:
    group = derived_group("derived", member)
    accounts, regions = region_models(random.Random(1))
    accounts.commit()
    captures = [model.flush(tmp_path / model.name, model.name) for model in (accounts, regions)]
    spec = stage_spec(tmp_path, group, "r1", Lsn(accounts.lsn), captures)
    with pytest.raises(RefreshError, match=message) as failed:
        run_job(spark, spec)
    assert is_final(failed.value) == isinstance(member, SqlMember)  # a query that does not bind never will
    assert read_member_manifest(spec.staging_root, "bad") is None
    for name in ("accounts", "regions", "by_name", "totals"):
        assert read_member_manifest(spec.staging_root, name) is not None, name


def test_watermark_not_after_previous_cut_is_refused(spark: SparkSession, tmp_path: Path) -> None:
    group = derived_group("derived")
    accounts, regions = region_models(random.Random(2))
    accounts.commit()
    captures = [model.flush(tmp_path / model.name, model.name) for model in (accounts, regions)]
    spec = stage_spec(tmp_path, group, "r1", Lsn(500), captures, prev_watermark=Lsn(900), cut_number=2)
    with pytest.raises(InvalidWatermarkError, match=r"run 'r1': W=0/1F4 is not after the last cut's W=0/384"):
        run_job(spark, spec)


def test_one_member_at_a_time_needs_its_sources_staged_first(spark: SparkSession, tmp_path: Path) -> None:
    group = derived_group("derived")
    accounts, regions = region_models(random.Random(4))
    accounts.commit()
    captures = [model.flush(tmp_path / model.name, model.name) for model in (accounts, regions)]
    spec = stage_spec(tmp_path, group, "r1", Lsn(accounts.lsn), captures)
    with pytest.raises(RefreshError, match=r"member 'by_name': .*source 'accounts' of member 'by_name' has no "
                                           r"reusable output"):
        run_job(spark, spec, ["by_name"])
    for name in ("accounts", "regions", "by_name", "totals"):
        assert set(run_job(spark, spec, [name])) == {name}
    assert read_member_manifest(spec.staging_root, "by_name") is not None


def test_a_member_alone_never_reads_a_source_staged_from_another_declaration(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A retry of one member (a per-member Spark application) after its source's declaration
    changed between tries: the source's staged output is stale until it is computed again."""
    names = SqlMember("names", "SELECT name FROM by_name", sources=("by_name",))
    accounts, regions = region_models(random.Random(6))
    accounts.commit()
    captures = [model.flush(tmp_path / model.name, model.name) for model in (accounts, regions)]
    group = derived_group("derived", names)
    spec = stage_spec(tmp_path, group, "r1", Lsn(accounts.lsn), captures)
    run_job(spark, spec)
    by_name = SqlMember("by_name", f"SELECT concat(name, '!') AS name FROM ({BY_NAME_SQL})", ("accounts", "regions"))
    edited = replace(group, members=tuple(by_name if member.name == "by_name" else member for member in group.members))
    spec = stage_spec(tmp_path, edited, "r1", Lsn(accounts.lsn), captures)
    with pytest.raises(RefreshError, match=r"source 'by_name' of member 'names' has no reusable output staged for W"):
        run_job(spark, spec, ["names"])
    run_job(spark, spec, ["by_name"])
    staged = run_job(spark, spec, ["names"])["names"]
    assert sorted(row["name"] for row in read_files(SnapshotFiles(staged.files)).to_pylist()) == ["Alpha!", "Beta!"]
