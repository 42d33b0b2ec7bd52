"""Every cut of a group read by a Spark with Iceberg's runtime, in the env of a pyspark that has one.

Usage: ``<env python> -m tests.integration.publish.runtime_reader <spec json file>``; the spec
names the catalog's properties (no password: the test's PostgreSQL trusts loopback), the group and
an output directory. Writes each member of each cut as ``<output>/<path>/<cut>/<member>.parquet``, read
by four paths in one ``local[2]`` session:

- ``scan``: ``Cut.to_spark`` in a session without an Iceberg catalog (streambed's snapshot scan);
- ``tag``: the plain reader's query, ``SELECT * FROM streambed.<ns>.<table> VERSION AS OF '<group>-cut-<k>'``,
  once the session has Iceberg's JDBC catalog for the group's catalog;
- ``found``: ``Cut.to_spark`` in that session (it finds the catalog);
- ``named``: ``Cut.to_spark(spark, catalog_name="streambed")``.

Logs go to stderr (the test reads which path ``to_spark`` took).
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pyspark
from pyspark.sql import DataFrame, SparkSession

from airflow_provider_streambed.read import CutReader
from airflow_provider_streambed.read.iceberg_runtime import jdbc_catalog_conf
from airflow_provider_streambed.testing.spark_envs import iceberg_runtime_jars


def write(frame: DataFrame, path: Path) -> None:
    """A DataFrame's rows as one Parquet file (through Arrow: the types as Spark has them)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(frame.toArrow(), path)


def main() -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(name)s %(levelname)s %(message)s")
    spec = json.loads(Path(sys.argv[1]).read_text())
    props, output = spec["catalog"], Path(spec["output"])
    spark = (SparkSession.builder.master("local[2]").appName("streambed-runtime-reader")
             .config("spark.jars", iceberg_runtime_jars(pyspark.__version__))
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    cuts = CutReader(props, spec["group"]).list()
    for cut in cuts:
        for name, frame in cut.to_spark(spark).items():
            write(frame, output / "scan" / str(cut.cut_id) / f"{name}.parquet")
    for key, value in jdbc_catalog_conf(props).items():  # a catalog can be added to a running session
        spark.conf.set(key, value)
    for cut in cuts:
        for name, member in cut.members.items():
            query = f"SELECT * FROM streambed.{member.table_identifier} VERSION AS OF '{cut.group}-cut-{cut.cut_id}'"
            write(spark.sql(query), output / "tag" / str(cut.cut_id) / f"{name}.parquet")
        for path, frames in (("found", cut.to_spark(spark)), ("named", cut.to_spark(spark, catalog_name="streambed"))):
            for name, frame in frames.items():
                write(frame, output / path / str(cut.cut_id) / f"{name}.parquet")
    spark.stop()


if __name__ == "__main__":
    main()
