"""The PySpark member of the Spark-line test (:mod:`.test_spark_line`), importable by its driver."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from airflow_provider_streambed.refresh.derived.members import CutContext

#: The variable naming a file whose absence makes :func:`day_totals` kill its driver once.
KILL_FLAG = "STREAMBED_TEST_KILL_FLAG"


def day_totals(spark: SparkSession, inputs: dict[str, DataFrame], cut: CutContext) -> DataFrame:
    """Readings and their amount per day. When :data:`KILL_FLAG` names a missing file, it writes
    the file and SIGKILLs the driver's process first (a crash during Spark, after the members
    computed before it were staged)."""
    flag = os.environ.get(KILL_FLAG)
    if flag and not Path(flag).exists():
        Path(flag).write_text("killed once")
        os.kill(os.getpid(), signal.SIGKILL)
    return inputs["readings"].groupBy("on_date").agg(
        F.count("*").alias("readings"), F.sum("amount").alias("amount"))
