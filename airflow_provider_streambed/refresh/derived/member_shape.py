"""An incremental SQL member's shape: recorded with its output, read from Spark's plan when not.

Reading a query's shape (:mod:`.query_shape`) needs Spark's analysed plan, which only a classic
session gives: on Spark Connect it takes a local classic Spark (a JVM in the worker, seconds to
start) over empty views of the sources' schemas (:func:`local_shape`). So the shape, or why the
query is not incremental, is recorded with the member's snapshot (its manifest's ``shape``, a
snapshot property at publish) under a digest of what decides it: the query, its sources' schemas
and keys, and Spark's version. A run whose digest is the recorded one takes the record, on any
session; any other reads the plan again, and records it. A run that updates the member without
Spark (:mod:`.duckdb_delta`) takes the record as it is
(:func:`.shape.recorded_shape`): its query is the one recorded and its source's columns
did not change, which is what the digest stands for.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from pyspark.errors import PySparkRuntimeError
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.member_declarations import SqlMember
from airflow_provider_streambed.refresh.derived.members import bound_query
from airflow_provider_streambed.refresh.derived.query_shape import analyzed_plan, group_by_shape
from airflow_provider_streambed.refresh.derived.shape import RECORD_FORM, GroupByShape, from_record, to_record
from airflow_provider_streambed.refresh.spark.connect_variables import CONNECT_VARIABLES, connect_mode
from airflow_provider_streambed.refresh.spark.session import REQUIRED_CONF

logger = logging.getLogger(__name__)

#: Settings of the local session that reads a plan on Spark Connect: one core, no UI.
LOCAL_ANALYSIS_CONF = {"spark.ui.enabled": "false", "spark.api.mode": "classic", **REQUIRED_CONF}


def shape_digest(query: str, schemas: Mapping[str, StructType], keys: Mapping[str, tuple[str, ...]],
                 spark_version: str) -> str:
    """A short digest of what decides a query's shape: the query, its sources' ``schemas`` and
    ``keys`` (by source name), and Spark's version."""
    text = json.dumps({"form": RECORD_FORM, "query": query, "spark": spark_version,
                       "sources": {name: [schema.json(), list(keys.get(name, ()))]
                                   for name, schema in sorted(schemas.items())}}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def member_shape(
    spark: SparkSession, group: RefreshGroup, member: SqlMember, keys: Mapping[str, tuple[str, ...]],
    at_w: Mapping[str, DataFrame], recorded: str | None,
) -> tuple[GroupByShape | str, str]:
    """The member's query shape over its sources' rows ``at_w`` (with their declared ``keys``), or
    why it is not incremental, and its record to stage with the output: the ``recorded`` one when
    its digest holds, else read from the plan of ``spark`` or, on Spark Connect, of a local one."""
    schemas = {name: frame.schema for name, frame in at_w.items()}
    digest = shape_digest(member.query, schemas, keys, spark.version)
    if recorded is not None and (shape := from_record(recorded, digest)) is not None:
        return shape, recorded
    with bound_query(spark, group, member, at_w) as frame:
        read = group_by_shape(frame, keys) if analyzed_plan(frame) is not None else None
    if read is None:
        logger.info("group=%s member=%s: reading its query's plan with a local Spark (Spark Connect gives "
                    "none); the plan is recorded with its output for the next runs", group.name, member.name)
        read = local_shape(group, member, schemas, keys)
    return read, to_record(read, digest)


def local_shape(group: RefreshGroup, member: SqlMember, schemas: Mapping[str, StructType],
                keys: Mapping[str, tuple[str, ...]]) -> GroupByShape | str:
    """The member's query shape over empty sources of ``schemas``, read by a local classic Spark
    started for it (the process's Spark Connect session, if any, is left as it is), or why not."""
    try:
        with classic_session() as spark:
            empty = {name: spark.createDataFrame([], schema) for name, schema in schemas.items()}
            with bound_query(spark, group, member, empty) as frame:
                return group_by_shape(frame, keys)
    except PySparkRuntimeError as error:  # no Java, or pyspark-client alone: no local Spark starts
        return (f"its plan cannot be read on Spark Connect without a local Spark on the worker (the spark-submit "
                f"extra and Java; {error.getCondition()})")


@contextmanager
def classic_session() -> Iterator[SparkSession]:
    """The process's active classic Spark session, or a local one (one core) started for the block
    and stopped after; the variables a Spark Connect session sets in this process are hidden from
    it and restored after."""
    with connect_mode():
        for name in CONNECT_VARIABLES:
            os.environ.pop(name, None)
        running = SparkSession.getActiveSession()
        if running is not None:
            yield running
            return
        builder = SparkSession.builder.master("local[1]").appName("streambed-plan")
        for key, value in LOCAL_ANALYSIS_CONF.items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
        try:
            yield spark
        finally:
            spark.stop()
