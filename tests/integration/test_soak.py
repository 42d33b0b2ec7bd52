"""The default soak (``benchmarks/soak.py``): 30 runs of the bank group under writers, a real fault
in about a third of them, each failed run retried: no cut breaks the invariant, nothing is lost
or doubled (issue 15, item 9)."""

from __future__ import annotations

import pytest

from benchmarks.soak import main

pytestmark = pytest.mark.slow


def test_the_default_soak_loses_and_doubles_nothing(spark_connect_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    report = main(["--spark-remote", spark_connect_url])
    print(capsys.readouterr().out)  # the soak's figures, in the test log
    assert report.runs == 31 and sum(report.faults.values()) >= 5 and report.unfailed == 0
    assert report.problems == []
    assert (report.lost, report.doubled) == (0, 0)
    assert report.cuts == 31
