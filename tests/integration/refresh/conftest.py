"""Fixtures of the refresh tests: one in-process Spark session (local[2]) for the session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from airflow_provider_streambed.testing.spark import local_spark_session


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """A real local[2] Spark session configured like the refresh job."""
    session = local_spark_session("streambed-refresh-tests")
    yield session
    session.stop()
