"""The lowest Airflow the package declares: the Airflow-facing tests in a virtualenv holding it.

The whole suite runs on the newest Airflow 3.x (``make install`` takes it); this runs the tests of
the task group, the operators, the change trigger and ``dag.test()`` end to end in a virtualenv
with ``apache-airflow==`` :data:`LOWEST_AIRFLOW` (and the default pyspark), made once and kept
(:func:`~airflow_provider_streambed.testing.spark_envs.spark_env_python`). It prints what it cost.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time

import pyspark
import pytest

from airflow_provider_streambed.testing.spark_envs import spark_env_python
from tests.integration.matrix.runner import ROOT, assert_passed, pytest_in

pytestmark = [pytest.mark.slow, pytest.mark.matrix]

#: The lowest Airflow that pyproject.toml allows (``apache-airflow>=...``).
LOWEST_AIRFLOW = re.search(r'"apache-airflow>=([\d.]+),', (ROOT / "pyproject.toml").read_text()).group(1)  # type: ignore[union-attr]
AIRFLOW_TESTS = ("tests/unit/operators", "tests/unit/test_task_group.py", "tests/unit/triggers",
                 "tests/unit/test_provider_info.py", "tests/integration/airflow/test_dag_end_to_end.py",
                 "tests/integration/airflow/test_event_schedule.py", "tests/integration/triggers")


def test_the_airflow_facing_tests_pass_on_the_lowest_declared_airflow() -> None:
    started = time.perf_counter()
    python = spark_env_python(pyspark.__version__, airflow_version=LOWEST_AIRFLOW)
    made = time.perf_counter() - started
    run = pytest_in(python, *AIRFLOW_TESTS)
    took = time.perf_counter() - started - made
    print(f"Airflow {LOWEST_AIRFLOW}: env ready in {made:.0f} s, tests {took:.0f} s", file=sys.stderr)
    installed = subprocess.run([str(python), "-c", "import airflow; print(airflow.__version__)"],
                               capture_output=True, text=True, check=True).stdout.split()[-1]
    assert installed == LOWEST_AIRFLOW
    assert_passed(run, f"Airflow {LOWEST_AIRFLOW}")
