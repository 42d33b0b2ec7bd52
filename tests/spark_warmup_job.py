"""A small Spark job run once per test session so its JVM archives the classes Spark loads (CDS).

``spark_class_archive`` in ``tests/conftest.py`` runs it with ``spark-submit`` and
``-XX:ArchiveClassesAtExit``; every later Spark JVM of the session maps that archive instead of
loading and verifying those classes from the jars again. It does in small what the refresh job
does: Parquet in (schemas merged) and out, SQL over temporary views, joins, aggregates, windows.

Usage: ``spark-submit tests/spark_warmup_job.py DIRECTORY``
"""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import Window
from pyspark.sql import functions as F

from airflow_provider_streambed.testing.spark import local_spark_session


def main(directory: Path) -> None:
    """Write two Parquet files, read, join, aggregate and rank them in Spark, write and read back the result."""
    rows = range(2000)
    pq.write_table(pa.table({"id": list(rows), "region": [f"r{i % 7}" for i in rows],
                             "amount": [float(i) for i in rows]}), directory / "part-0.parquet")
    pq.write_table(pa.table({"id": [1, 2], "region": ["r1", "r2"], "amount": [1.5, 2.5], "note": ["a", "b"]}),
                   directory / "part-1.parquet")
    spark = local_spark_session("streambed-class-archive")
    frame = spark.read.option("mergeSchema", "true").parquet(str(directory / "part-0.parquet"),
                                                             str(directory / "part-1.parquet"))
    frame.createOrReplaceTempView("moves")
    totals = spark.sql("SELECT region, count(*) AS moves, sum(amount) AS total FROM moves GROUP BY region")
    ranked = frame.join(F.broadcast(totals), "region").withColumn(
        "rank", F.row_number().over(Window.partitionBy("region").orderBy(F.col("amount").desc())))
    ranked.filter(F.col("rank") <= 3).write.mode("overwrite").parquet(str(directory / "out"))
    assert spark.read.parquet(str(directory / "out")).count() == 21
    spark.stop()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
