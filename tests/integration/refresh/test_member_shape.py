"""A SQL member's shape read by a local classic Spark, as on a Spark Connect worker
(:func:`.member_shape.local_shape`), in a fresh process that runs no Spark of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

#: Reads the shape of a GROUP BY in this process, then prints it and what is left running.
SCRIPT = """
import json, os
from pyspark.sql import SparkSession
from pyspark.sql.types import DecimalType, IntegerType, StructField, StructType
from airflow_provider_streambed import Mirror, RefreshGroup, SqlMember
from airflow_provider_streambed.refresh.derived.member_shape import local_shape
from airflow_provider_streambed.refresh.derived.shape import to_record

member = SqlMember("totals", "SELECT grp, COUNT(*) AS n, SUM(amount) AS s FROM facts GROUP BY grp", ("facts",))
schema = StructType([StructField("grp", IntegerType()), StructField("amount", DecimalType(12, 2))])
os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"  # as a Spark Connect session leaves it
group = RefreshGroup("g", "src", "cat", "ns", (Mirror("public.facts"), member))
shape = local_shape(group, member, {"facts": schema}, {"facts": ()})
os.environ.pop("SPARK_CONNECT_MODE_ENABLED")
print(json.dumps({"record": to_record(shape, "d"), "running": SparkSession.getActiveSession() is not None}))
"""


def _run(environment: dict[str, str]) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=environment, capture_output=True, text=True,
                          timeout=300, check=True, cwd=Path(__file__).parents[3])
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_local_spark_reads_the_plan_and_is_stopped_after() -> None:
    found = _run(dict(os.environ))
    record = json.loads(str(found["record"]))
    assert record["sources"] == ["facts"] and record["keys"] == [["grp", "facts", "grp"]]
    assert [aggregate[1] for aggregate in record["aggregates"]] == ["count", "sum"]
    assert found["running"] is False


def test_without_java_the_plan_is_not_read_and_says_why(tmp_path: Path) -> None:
    environment = {**os.environ, "JAVA_HOME": str(tmp_path / "no-java")}  # Spark's launcher runs its bin/java
    record = json.loads(str(_run(environment)["record"]))
    assert record["reason"] == ("its plan cannot be read on Spark Connect without a local Spark on the worker (the "
                                "spark-submit extra and Java; JAVA_GATEWAY_EXITED)")
