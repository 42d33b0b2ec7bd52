"""PythonMember functions used by the refresh tests (imported by the Spark driver)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from airflow_provider_streambed.refresh.derived.members import CutContext

#: The type of :func:`owner_totals`' and :func:`kind_totals`' sums, whole or updated.
TOTAL_TYPE = "decimal(22,2)"
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



def owner_totals(spark: SparkSession, inputs: dict[str, DataFrame], cut: CutContext) -> DataFrame:
    """Accounts, balances counted and their total per owner (NULL owners a group of their own),
    updated from the previous output and the changes of ``accounts`` when the run allows it."""
    return totals(inputs, cut, "accounts", "owner", "balance")


def kind_totals(spark: SparkSession, inputs: dict[str, DataFrame], cut: CutContext) -> DataFrame:
    """The same per ``kind`` of the keyless ``events`` (duplicate rows count)."""
    return totals(inputs, cut, "events", "kind", "n")


def totals(inputs: dict[str, DataFrame], cut: CutContext, source: str, key: str, value: str) -> DataFrame:
    """Per ``key``: rows, non-NULL ``value``s and their sum; whole, or the previous output plus the
    signed sums of the rows removed (-1) and added (+1), a group left without rows dropped."""
    if cut.previous is None:
        return _signed_totals(inputs[source].withColumn("sign", F.lit(1)), key, value)
    changes = cut.changes[source]
    signed = changes.removed.withColumn("sign", F.lit(-1)).unionByName(changes.added.withColumn("sign", F.lit(1)))
    joined = cut.previous.alias("p").join(_signed_totals(signed, key, value).alias("d"),
                                          F.col(f"p.{key}").eqNullSafe(F.col(f"d.{key}")), "full_outer")

    def plus(name: str) -> Column:
        return F.coalesce(F.col(f"p.{name}"), F.lit(0)) + F.coalesce(F.col(f"d.{name}"), F.lit(0))

    return joined.select(
        F.coalesce(F.col(f"p.{key}"), F.col(f"d.{key}")).alias(key),
        plus("rows").cast("long").alias("rows"),
        plus("counted").cast("long").alias("counted"),
        F.when(plus("counted") > 0, plus("total")).cast(TOTAL_TYPE).alias("total"),
    ).where(F.col("rows") > 0)


def _signed_totals(signed: DataFrame, key: str, value: str) -> DataFrame:
    """Per ``key``: rows, non-NULL ``value``s and their sum, each row counted ``sign`` times."""
    return signed.groupBy(key).agg(
        F.sum("sign").cast("long").alias("rows"),
        F.sum(F.when(F.col(value).isNotNull(), F.col("sign")).otherwise(0)).cast("long").alias("counted"),
        F.sum(F.col(value) * F.col("sign")).cast(TOTAL_TYPE).alias("total"),
    )
