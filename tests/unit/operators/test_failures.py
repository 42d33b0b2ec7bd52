"""How the operators tell a task's last try (the run then frees its group), and fail a final error at once."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_provider_streambed import Mirror, RefreshGroup
from airflow_provider_streambed.compat.airflow import AirflowFailException
from airflow_provider_streambed.operators.base import will_retry
from airflow_provider_streambed.operators.refresh import RefreshGroupOperator


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


def test_a_wrong_catalog_connection_fails_the_task_without_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """A final error raised while the catalog opens (before any step) skips Airflow's retries too."""
    monkeypatch.setenv("AIRFLOW_CONN_LAKE", json.dumps({"conn_type": "streambed_catalog", "extra": {"uri": "x"}}))
    group = RefreshGroup(name="bank", source_conn_id="bank_pg", catalog_conn_id="lake", namespace="bank",
                         members=[Mirror("accounts")])
    task = RefreshGroupOperator(task_id="refresh", group=group)
    context: Any = {"dag": SimpleNamespace(dag_id="d"), "dag_run": SimpleNamespace(run_id="r"),
                    "ti": SimpleNamespace(try_number=1, max_tries=3)}
    with pytest.raises(AirflowFailException, match=r"ConnectionConfigError: catalog connection 'lake': extra "
                                                   r"'warehouse' \(a URI\) is required"):
        task.execute(context)
