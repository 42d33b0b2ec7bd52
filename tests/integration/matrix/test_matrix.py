"""The Spark-line matrix: :mod:`.test_spark_line` on each supported Spark line besides the default one.

Each line runs that module with pytest in a virtualenv holding its pyspark and this package
(:func:`~airflow_provider_streambed.testing.spark_envs.spark_env_python`, made once and kept), its
``bin`` first on ``PATH`` so that spark-submit is that line's. The lines run are
``STREAMBED_SPARK_LINES`` (space-separated pyspark versions; default: one per line, 3.5 to 4.3,
the default 4.2 excepted, which ``make test-matrix`` runs in this Python). Each prints what it
cost: the env's making, the run.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from airflow_provider_streambed.testing.spark_envs import spark_env_python
from tests.integration.matrix.runner import assert_passed, pytest_in

pytestmark = [pytest.mark.slow, pytest.mark.matrix]

LINE_TEST = Path(__file__).with_name("test_spark_line.py")
#: The pyspark of each supported Spark line other than the default (README's matrix); of 3.5,
#: 3.5.7: the 3.5 release of Spark Connect's server jar served here (java/pom.xml).
OTHER_LINES = ("3.5.7", "4.0.5", "4.1.4", "4.3.0")
LINES = tuple(os.environ.get("STREAMBED_SPARK_LINES", " ".join(OTHER_LINES)).split())


@pytest.mark.parametrize("pyspark_version", LINES)
def test_the_spark_line_test_passes_on(pyspark_version: str) -> None:
    started = time.perf_counter()
    python = spark_env_python(pyspark_version)
    made = time.perf_counter() - started
    run = pytest_in(python, "-m", "matrix", str(LINE_TEST))
    took = time.perf_counter() - started - made
    print(f"pyspark {pyspark_version}: env ready in {made:.0f} s, line test {took:.0f} s", file=sys.stderr)
    assert_passed(run, f"pyspark {pyspark_version}")
