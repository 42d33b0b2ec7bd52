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
import subprocess
import sys
import time
from pathlib import Path

import pytest

from airflow_provider_streambed.testing.spark_envs import spark_env_python

pytestmark = [pytest.mark.slow, pytest.mark.matrix]

ROOT = Path(__file__).resolve().parents[3]
LINE_TEST = Path(__file__).with_name("test_spark_line.py")
#: The pyspark of each supported Spark line other than the default (README's matrix).
OTHER_LINES = ("3.5.7", "4.0.5", "4.1.4", "4.3.0")
LINES = tuple(os.environ.get("STREAMBED_SPARK_LINES", " ".join(OTHER_LINES)).split())


@pytest.mark.parametrize("pyspark_version", LINES)
def test_the_spark_line_test_passes_on(pyspark_version: str) -> None:
    started = time.perf_counter()
    python = spark_env_python(pyspark_version)
    made = time.perf_counter() - started
    environment = {**os.environ, "PATH": os.pathsep.join([str(python.parent), os.environ.get("PATH", "")])}
    environment.pop("PYTHONPATH", None)
    run = subprocess.run(
        [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "matrix", str(LINE_TEST)],
        cwd=ROOT, env=environment, capture_output=True, text=True, check=False, timeout=1800,
    )
    took = time.perf_counter() - started - made
    print(f"pyspark {pyspark_version}: env ready in {made:.0f} s, line test {took:.0f} s", file=sys.stderr)
    assert run.returncode == 0, f"pyspark {pyspark_version}:\n{run.stdout[-12000:]}\n{run.stderr[-3000:]}"
    assert " passed" in run.stdout.splitlines()[-1], run.stdout[-2000:]
