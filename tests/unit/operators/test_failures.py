"""How the operators tell a task's last try (the run then frees its group)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from airflow_provider_streambed.operators.base import will_retry


@pytest.mark.parametrize(
    ("try_number", "max_tries", "retried"),
    [
        (1, 0, False),  # retries=0: the first try is the last
        (1, 2, True),
        (2, 2, True),
        (3, 2, False),  # retries=2: the third try is the last
        (3, 4, True),  # a cleared task: Airflow raised max_tries by the task's retries
    ],
)
def test_will_retry_follows_try_number_and_max_tries(try_number: int, max_tries: int, retried: bool) -> None:
    context: Any = {"ti": SimpleNamespace(try_number=try_number, max_tries=max_tries)}
    assert will_retry(context) is retried
