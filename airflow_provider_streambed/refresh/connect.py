"""Running the refresh job as a Spark Connect client against a long-running server (no JVM here).

The job code is the same as under spark-submit (:func:`~.job.run_job`, DataFrame APIs only):
here it runs in the caller's process (an Airflow worker, ``refresh_once``) on a remote session,
and only query plans travel to the server. Each run gets a session of its own (temporary views
and settings do not leak between runs) and closes it at the end. The staged files' paths must be
readable and writable by the server (a shared file system or object storage).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from airflow_provider_streambed.dependencies import check_spark_reachable, describe_remote
from airflow_provider_streambed.exceptions import RefreshError
from airflow_provider_streambed.refresh.submit import CONNECT_VARIABLES
from airflow_provider_streambed.staging import JobSpec, MemberManifest

logger = logging.getLogger(__name__)


def run_on_connect(
    spec: JobSpec, url: str, members: Sequence[str] = (), connection: str | None = None
) -> dict[str, MemberManifest]:
    """Compute and stage the spec's members (or ``members``) on the Spark Connect server at ``url``.

    Args:
        spec: the job spec.
        url: the server's ``sc://host:port[/;params]`` URL (never logged whole).
        members: members to compute (default: the spec's).
        connection: the Airflow connection id the URL came from, for messages.

    Raises:
        RefreshError: the server cannot be reached (naming the connection and server), or
            members failed.
    """
    # pyspark (and the job, which imports it) load when a run starts: local.py imports this module,
    # and a refresh_once whose mirrors all merge in-process needs no pyspark. No circle is dodged.
    from pyspark.errors.exceptions.connect import SparkConnectGrpcException
    from pyspark.sql import SparkSession

    from airflow_provider_streambed.refresh.job import run_job
    from airflow_provider_streambed.refresh.session import REQUIRED_CONF

    where = describe_remote(url, connection)
    check_spark_reachable(url, connection)
    logger.info("group=%s W=%s: running the refresh on the Spark Connect server %s", spec.group["name"],
                spec.watermark, where)
    with connect_mode():
        try:
            spark = SparkSession.builder.remote(url).create()
            for key, value in REQUIRED_CONF.items():
                spark.conf.set(key, value)
        except SparkConnectGrpcException as error:
            raise RefreshError(f"the Spark Connect server {where} cannot be reached: "
                               f"{str(error).splitlines()[0]}") from error
        try:
            return run_job(spark, spec, members)
        finally:
            spark.stop()


@contextmanager
def connect_mode() -> Iterator[None]:
    """Undo, on exit, the process-wide switch pyspark makes when a remote session is created.

    pyspark sets ``SPARK_CONNECT_MODE_ENABLED`` (and may set ``SPARK_REMOTE``) in ``os.environ``,
    which turns every later PySpark call in this process, and every spark-submit it starts, into
    Spark Connect ones (a later spark-submit job then fails). The variables are restored when the
    refresh is done.
    """
    saved = {name: os.environ.get(name) for name in CONNECT_VARIABLES}
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
