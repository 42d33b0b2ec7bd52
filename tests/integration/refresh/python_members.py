"""PythonMember functions used by the refresh tests (imported by the Spark driver)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from airflow_provider_streambed.refresh.members import CutContext

#: Environment variable naming the flag file of :func:`flaky_totals`.
FLAKY_FLAG = "STREAMBED_TEST_FLAKY_FLAG"


def region_totals(spark: SparkSession, inputs: dict[str, DataFrame], cut: CutContext) -> DataFrame:
    """Balance total and account count per region, with the cut's number."""
    return (
        inputs["accounts"]
        .groupBy("region")
        .agg(F.sum("balance").alias("total"), F.count("*").alias("accounts"))
        .withColumn("cut_number", F.lit(cut.cut_number))
    )


def flaky_totals(spark: SparkSession, inputs: dict[str, DataFrame], cut: CutContext) -> DataFrame:
    """Like :func:`region_totals`, but fails on its first call (the flag file does not exist yet)."""
    flag = Path(os.environ[FLAKY_FLAG])
    if not flag.exists():
        flag.write_text("failed once")
        raise RuntimeError("flaky member fails on its first call")
    return region_totals(spark, inputs, cut)


def not_a_frame(spark: SparkSession, inputs: dict[str, DataFrame], cut: CutContext) -> Any:
    """Returns rows instead of a DataFrame (a user error)."""
    return inputs["accounts"].collect()


def raises(spark: SparkSession, inputs: dict[str, DataFrame], cut: CutContext) -> DataFrame:
    """Fails as user code does."""
    raise ValueError(f"no region z in cut {cut.cut_number}")
