"""A local Spark session configured like the refresh job, for tests and benchmarks."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from pyspark.sql import SparkSession

from airflow_provider_streambed.refresh.job import REQUIRED_CONF, quiet_py4j
from airflow_provider_streambed.refresh.plan import LOCAL_CONF


def local_spark_session(app_name: str) -> SparkSession:
    """The process's ``local[2]`` Spark session with the job's required and local settings.

    Python workers run this interpreter. Like ``getOrCreate``, a session already running in the
    process is returned (with these settings applied to it where Spark allows).
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.master("local[2]").appName(app_name)
    for key, value in {**LOCAL_CONF, **REQUIRED_CONF}.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    quiet_py4j()
    return session


class EventLogs:
    """A directory Spark writes its event logs to: counts the applications started (one file each).

    Args:
        directory: the directory, created if missing.
    """

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory

    def conf(self) -> dict[str, str]:
        """The Spark configuration that makes every application log there."""
        return {"spark.eventLog.enabled": "true", "spark.eventLog.dir": self.directory.as_uri()}

    def applications(self) -> int:
        """How many applications have written an event log."""
        return len(list(self.directory.iterdir()))
