"""Running the refresh job as a Spark Connect client against a long-running server (no JVM here).

The job code is the same as under spark-submit (:func:`~.job.run_job`, DataFrame APIs only):
here it runs in the caller's process (an Airflow worker, ``refresh_once``) on a remote session,
and only query plans travel to the server. Each run gets a session of its own (temporary views
and settings do not leak between runs) and closes it at the end. The staged files' paths must be
readable and writable by the server (a shared file system or object storage).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from airflow_provider_streambed.dependencies import check_spark_reachable, describe_remote
from airflow_provider_streambed.exceptions import RefreshError
from airflow_provider_streambed.refresh.spark.connect_variables import connect_mode
from airflow_provider_streambed.staging import JobSpec, MemberManifest

logger = logging.getLogger(__name__)


def run_on_connect(
    spec: JobSpec, url: str, members: Sequence[str] = (), connection: str | None = None,
    settings: Mapping[str, Any] | None = None,
) -> dict[str, MemberManifest]:
    """Compute and stage the spec's members (or ``members``) on the Spark Connect server at ``url``.

    Args:
        spec: the job spec.
        url: the server's ``sc://host:port[/;params]`` URL (never logged whole).
        members: members to compute (default: the spec's).
        connection: the Airflow connection id the URL came from, for messages.
        settings: the refresh's Spark configuration: its ``spark.streambed.*`` settings are set on
            the session (a full refresh, the in-process merge), as the refresh task reads them;
            the rest is the server's to decide.

    Raises:
        RefreshError: the server cannot be reached (naming the connection and server), or
            members failed.
    """
    # pyspark (and the job, which imports it) load when a run starts: local.py imports this module,
    # and a refresh_once whose mirrors all merge in-process needs no pyspark. No circle is dodged.
    from pyspark.errors.exceptions.connect import SparkConnectGrpcException
    from pyspark.sql import SparkSession

    from airflow_provider_streambed.refresh.spark.job import run_job
    from airflow_provider_streambed.refresh.spark.session import REQUIRED_CONF

    where = describe_remote(url, connection)
    check_spark_reachable(url, connection)
    logger.info("group=%s W=%s: running the refresh on the Spark Connect server %s", spec.group["name"],
                spec.watermark, where)
    with connect_mode():
        try:
            spark = SparkSession.builder.remote(url).create()
            streambed = {key: str(value) for key, value in (settings or {}).items()
                         if key.startswith("spark.streambed.")}
            for key, value in {**REQUIRED_CONF, **streambed}.items():
                spark.conf.set(key, value)
        except SparkConnectGrpcException as error:
            raise RefreshError(f"the Spark Connect server {where} cannot be reached: "
                               f"{str(error).splitlines()[0]}") from error
        try:
            return run_job(spark, spec, members)
        finally:
            spark.stop()
