"""A short soak (``benchmarks/soak.py``): 15 runs of the bank group under writers, a real fault of
every kind in ten of them, each failed run retried: no cut breaks the invariant, nothing is lost
or doubled (issue 15, item 9). The seed is one whose draws inject each of the soak's faults."""

from __future__ import annotations

import pytest

from benchmarks.soak import FAULTS, main

pytestmark = pytest.mark.slow


def test_a_soak_with_every_fault_loses_and_doubles_nothing(
    spark_connect_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    report = main(["--runs", "15", "--fault-rate", "0.6", "--seed", "334", "--spark-remote", spark_connect_url])
    print(capsys.readouterr().out)  # the soak's figures, in the test log
    assert report.runs == 16 and set(report.faults) == set(FAULTS) and report.unfailed == 0
    assert report.problems == []
    assert (report.lost, report.doubled) == (0, 0)
    assert report.cuts == 16
