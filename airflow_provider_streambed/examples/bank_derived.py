"""PythonMember functions of ``dags/example_derived.py`` (imported by the Spark driver only)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from airflow_provider_streambed.refresh import CutContext


# [START derived_function]
def sender_totals(spark: SparkSession, inputs: dict[str, DataFrame], cut: CutContext) -> DataFrame:
    """Per sending account: transfers sent and amount sent, stamped with the cut's W."""
    from pyspark.sql import functions as F

    return (
        inputs["transfers"]
        .groupBy("src")
        .agg(F.count("*").alias("transfers_sent"), F.sum("amount").alias("amount_sent"))
        .withColumn("watermark_lsn", F.lit(str(cut.watermark)))
    )
# [END derived_function]
