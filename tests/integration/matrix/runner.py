"""Running pytest in another virtualenv (:mod:`airflow_provider_streambed.testing.spark_envs`) for the matrices."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def pytest_in(python: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    """pytest with ``arguments`` run by ``python`` from the repository, that env's ``bin`` first on
    ``PATH`` (its spark-submit and airflow are the ones run) and no ``PYTHONPATH`` of this one."""
    environment = {**os.environ, "PATH": os.pathsep.join([str(python.parent), os.environ.get("PATH", "")])}
    environment.pop("PYTHONPATH", None)
    return subprocess.run([str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", *arguments],
                          cwd=ROOT, env=environment, capture_output=True, text=True, check=False, timeout=1800)


def assert_passed(run: subprocess.CompletedProcess[str], label: str) -> None:
    """Assert that the pytest run passed, and ran tests; the message ends with its output."""
    assert run.returncode == 0, f"{label}:\n{run.stdout[-12000:]}\n{run.stderr[-3000:]}"
    assert " passed" in run.stdout.splitlines()[-1], run.stdout[-2000:]
