"""The refresh job's Spark session: the settings it needs, and sharing it with threads.

:func:`share_session` is the package's one use of pyspark's private API (docs/limitations).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from pyspark.sql import SparkSession

from airflow_provider_streambed.read.spark_snapshot import TIME_TYPE_CONF
from airflow_provider_streambed.refresh.spark.object_store import CONNECTOR_CONF, S3A, s3a_settings, unset_settings

logger = logging.getLogger(__name__)

#: Settings the job needs whatever the user's Spark configuration says.
REQUIRED_CONF = {
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.sql.session.timeZone": "UTC",
    TIME_TYPE_CONF: "true",
}


def share_session(spark: SparkSession) -> None:
    """Make ``spark`` the active session of this thread's JVM thread (classic Spark; Connect does it per request).

    A Python thread's Spark calls run on a JVM thread of their own, where no session is active,
    and Spark 4.2 reads some settings from the thread's active session only: without this, a
    ``time`` column fails with ``UNSUPPORTED_TIME_TYPE`` in a thread whatever the session says.
    Private API (``_jvm``, ``_jsparkSession``): no public one sets the JVM's active session;
    ``tests/integration/refresh/test_threads.py`` checks the upstream behaviour it works around.
    """
    session = getattr(spark, "_jsparkSession", None)
    if session is not None:
        spark._jvm.org.apache.spark.sql.SparkSession.setActiveSession(session)  # type: ignore[union-attr]


def quiet_py4j() -> None:
    """Keep py4j's per-call INFO lines out of the logs.

    Besides the noise, its "Closing down clientserver connection" line is logged from a finalizer
    at interpreter exit, when the log streams may be closed already ("--- Logging error ---").
    """
    logging.getLogger("py4j").setLevel(logging.WARNING)


def build_session(app_name: str) -> SparkSession:
    """The application's Spark session, with the settings the job needs."""
    builder = SparkSession.builder.appName(app_name)
    for key, value in REQUIRED_CONF.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def use_object_store(spark: SparkSession, properties: Mapping[str, str]) -> None:
    """Let ``spark`` read and write ``s3://`` URIs of the store ``properties`` describe (public
    object-store properties): the S3A settings of :mod:`.object_store` that the user's Spark
    configuration does not hold, set on the session (each query's Hadoop configuration is built
    from it: under spark-submit and on a Spark Connect server alike).

    Raises:
        ConfigurationError: ``spark.streambed.s3.connector`` is neither ``s3a`` nor ``native`` (final).
    """
    connector = spark.conf.get(CONNECTOR_CONF, S3A) or S3A
    settings = s3a_settings(properties, connector)
    configured = {name: spark.conf.get(name, None) for key in settings for name in (key, f"spark.hadoop.{key}")}
    chosen = unset_settings(settings, configured)
    for key, value in chosen.items():
        spark.conf.set(key, value)
    logger.info("object store: s3:// through %s (%s set here: %s; the rest from the Spark configuration)",
                "S3A" if connector == S3A else "the platform's connector", len(chosen), ", ".join(sorted(chosen)))
