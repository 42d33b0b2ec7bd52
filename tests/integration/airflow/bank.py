"""The bank invariant as a test assertion (the bank source lives in ``examples/bank.py``)."""

from __future__ import annotations

from airflow_provider_streambed.examples.bank import cut_problems
from airflow_provider_streambed.read import Cut


def check_cut(cut: Cut, journal: set[int]) -> set[int]:
    """Assert the bank invariant on one cut; returns the transfer ids it holds."""
    problems, ids = cut_problems(cut, journal)
    assert not problems, f"cut {cut.cut_id}: {problems}"
    return ids
