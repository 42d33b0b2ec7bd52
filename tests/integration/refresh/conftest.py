"""Fixtures of the refresh tests: one in-process Spark session (local[2]) for the session."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from airflow_provider_streambed.refresh.job import REQUIRED_CONF
from airflow_provider_streambed.refresh.plan import LOCAL_CONF


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """A real local[2] Spark session configured like the refresh job."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.master("local[2]").appName("streambed-refresh-tests")
    for key, value in {**LOCAL_CONF, **REQUIRED_CONF}.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    yield session
    session.stop()
