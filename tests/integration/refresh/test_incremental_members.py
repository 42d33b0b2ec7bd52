"""Incremental PythonMembers on real PostgreSQL, real Spark (local[2]) and a real catalog.

A differential test: a random workload over several cuts (inserts, updates, deletes, key changes,
NULL group keys and values, duplicate rows in a keyless source, a source carried while the other
changed, an added column: a whole recompute; a full refresh asked for by Spark configuration) and
after every cut each incremental member equals, exactly, its twin computed whole by the same
function from the same cut.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from airflow_provider_streambed import Mirror, PythonMember, RefreshGroup
from airflow_provider_streambed.read import CutReader
from airflow_provider_streambed.refresh.incremental import INCREMENTAL_CONF
from tests.integration.refresh.cuts import cuts_of
from tests.integration.refresh.workloads import SCHEMA, workload

pytestmark = pytest.mark.slow

OWNERS = "tests.integration.refresh.python_members:owner_totals"
KINDS = "tests.integration.refresh.python_members:kind_totals"
GROUP = RefreshGroup("incr", "src", "cat", "incr", (
    Mirror("public.accounts"),
    Mirror("public.events", compact_deleted_ratio=0.2),
    # owners reads events too: a run that changes accounts only gives it events' empty changes
    PythonMember("owners", OWNERS, sources=["accounts", "events"], incremental=True),
    PythonMember("owners_whole", OWNERS, sources=["accounts", "events"]),
    PythonMember("kinds", KINDS, sources=["events"], incremental=True),
    PythonMember("kinds_whole", KINDS, sources=["events"]),
))
UPDATED = "from its previous output"


def _bag(table: pa.Table) -> Counter[tuple[Any, ...]]:
    return Counter(tuple(row.values()) for row in table.to_pylist())


def test_incremental_python_members_equal_a_whole_recompute_on_every_cut(
    pg_dsn: str, sqlite_catalog_uri: str, tmp_path: Path, spark: SparkSession
) -> None:
    rng = random.Random(3401)
    reasons: dict[str, list[str]] = defaultdict(list)
    with cuts_of(spark, tmp_path, pg_dsn, sqlite_catalog_uri, GROUP, SCHEMA) as cuts:
        reader = CutReader({"uri": sqlite_catalog_uri, "warehouse": cuts.warehouse}, GROUP)
        for run in range(6):  # run 4 adds a column to accounts (workloads.workload)
            if run:
                workload(pg_dsn, rng, run)
            cut = reader.get(cuts.publish(f"r{run}").cut_id)
            for name in ("owners", "kinds"):
                if name in cuts.staged:
                    reasons[name].append(cuts.staged[name].reason)
                whole = cut.to_arrow(f"{name}_whole")
                assert whole.num_rows > 0
                assert cut.to_arrow(name).schema == whole.schema
                assert _bag(cut.to_arrow(name)) == _bag(whole), f"cut {cut.cut_id}, member {name}: {reasons[name]}"
        spark.conf.set(INCREMENTAL_CONF, "false")  # a full refresh
        try:
            workload(pg_dsn, rng, 7)
            cut = reader.get(cuts.publish("full").cut_id)
        finally:
            spark.conf.unset(INCREMENTAL_CONF)
        assert cuts.staged["owners"].reason == f"whole: not incremental: {INCREMENTAL_CONF} is false (a full refresh)"
        assert _bag(cut.to_arrow("owners")) == _bag(cut.to_arrow("owners_whole"))
    for name in ("owners", "kinds"):
        assert reasons[name][0] == ("whole: not incremental: no previous output of its definition "
                                    "(its first cut, or its definition changed)")
        assert sum(reason.startswith(UPDATED) for reason in reasons[name]) >= 2, reasons[name]
    assert "whole: not incremental: its source 'accounts' changed its columns" in reasons["owners"], reasons["owners"]
