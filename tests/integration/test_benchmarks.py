"""Each benchmark runs once at its smoke size (``--quick``), as ``make bench`` runs it, and says so.

The figures of a smoke run mean nothing; what is checked is that the whole path still runs (a
move in the package breaks no benchmark unnoticed), and that a benchmark's own consistency checks,
which it prints rather than asserts, found nothing wrong. Benchmarks that take a Spark Connect
server use the session's instead of starting one.

The four benchmarks that start spark-submit applications (a JVM each, 10 to 30 s) take one to two
minutes each even at their smoke size, more than the suite's budget allows: they run only with
``STREAMBED_BENCH_SMOKE=all`` (``make bench-quick``), and say so in the suite's summary. So does
the scan through Iceberg's Spark runtime, which starts a JVM in the pyspark-4.1 env (and makes that
env first when it is missing: minutes), and the cluster shape's (a standalone cluster on namespaced
hosts).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.quick import SMOKE_LINE

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
RUNNABLE = sorted(path.stem for path in ROOT.glob("benchmarks/*.py")
                  if path.stem.startswith("bench_") or path.stem == "soak")
#: Given the session's Spark Connect server (``--spark-remote``).
ON_CONNECT = {"bench_bootstrap", "bench_connect", "soak"}
#: Smoke runs of three to six spark-submit applications each.
SPARK_SUBMIT = {"bench_connect", "bench_end_to_end", "bench_refresh", "bench_task_members"}
#: A smoke run in another pyspark's env (about 1.5 min on a busy machine), or on a cluster of
#: namespaced hosts (four spark-submit applications, about 1.5 min).
OTHER_SPARK = {"bench_cluster", "bench_runtime_scan"}
HEAVY = pytest.mark.skipif(os.environ.get("STREAMBED_BENCH_SMOKE") != "all",
                           reason="spark-submit applications, 1-2 min: STREAMBED_BENCH_SMOKE=all (make bench-quick)")
#: What a benchmark prints when a consistency check of its own fails.
FAILURES = ("DIFFER", "MONEY CHANGED", "not staged")


@pytest.mark.parametrize("name", [pytest.param(name, marks=HEAVY) if name in SPARK_SUBMIT | OTHER_SPARK else name
                                  for name in RUNNABLE])
def test_a_benchmark_runs_at_its_smoke_size(name: str, request: pytest.FixtureRequest) -> None:
    extra = ["--spark-remote", request.getfixturevalue("spark_connect_url")] if name in ON_CONNECT else []

    done = subprocess.run([sys.executable, "-m", f"benchmarks.{name}", "--quick", *extra], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, check=False)

    print(done.stdout)  # the figures, in the test log
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert SMOKE_LINE in lines and lines[-1] != SMOKE_LINE
    assert [line for line in lines if any(failure in line for failure in FAILURES)] == []
