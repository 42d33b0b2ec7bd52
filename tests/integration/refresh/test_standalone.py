"""The refresh on a real multi-JVM Spark cluster: a standalone master and worker from the pyspark
wheel, executors in the worker's JVM reading and writing the staged files through the shared path."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import psycopg
import pytest

from airflow_provider_streambed.examples.bank import load_bank, move_money
from airflow_provider_streambed.local import refresh_once
from airflow_provider_streambed.read import CutReader
from airflow_provider_streambed.testing.spark import StandaloneCluster
from tests.integration.airflow.bank import check_cut

pytestmark = pytest.mark.slow
DAGS = Path(__file__).resolve().parents[3] / "dags"


def test_bank_refreshes_on_a_standalone_cluster(pg_dsn: str, sqlite_catalog_uri: str, tmp_path: Path) -> None:
    sys.path.insert(0, str(DAGS))
    from example_bank import bank

    load_bank(pg_dsn)
    properties = {"uri": sqlite_catalog_uri, "warehouse": (tmp_path / "warehouse").as_uri()}
    journal: set[int] = set()
    rng = random.Random(4)
    with StandaloneCluster(tmp_path / "spark") as cluster:
        for _ in range(2):
            with psycopg.connect(pg_dsn) as conn:
                journal |= {move_money(conn, rng) for _ in range(15)}
            result = refresh_once(bank, source_dsn=pg_dsn, catalog_properties=properties, master=cluster.master,
                                  spark_conf={"spark.executor.memory": "512m", "spark.cores.max": "2"})
            assert result.cut is not None
        executors = list(cluster.work_dir.glob("app-*/*/stderr"))
    assert len({path.parent.parent for path in executors}) == 2, "each run's executors ran in the worker's JVM"
    cuts = CutReader(properties, bank).list()
    assert [cut.cut_id for cut in cuts] == [1, 2]
    assert check_cut(cuts[-1], journal) == journal
