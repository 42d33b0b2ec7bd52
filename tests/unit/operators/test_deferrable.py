"""The deferrable capture waits in the triggerer on its first try only, with the group's change trigger."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pendulum
import pytest
from airflow.sdk import DAG

from airflow_provider_streambed import Mirror, RefreshGroup
from airflow_provider_streambed.compat.airflow import TaskDeferred
from airflow_provider_streambed.operators.capture import CaptureWatermarkOperator
from airflow_provider_streambed.triggers.changes import GroupChangesTrigger

GROUP = RefreshGroup(name="bank", source_conn_id="bank_pg", catalog_conn_id="lake", namespace="bank",
                     members=[Mirror("accounts")])


def capture(**kwargs: Any) -> CaptureWatermarkOperator:
    with DAG("deferrable", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")):
        return CaptureWatermarkOperator(task_id="c", group=GROUP, deferrable=True, **kwargs)


def context(try_number: int = 1, **params: Any) -> Any:
    return {"ti": SimpleNamespace(try_number=try_number), "params": params}


def test_a_first_try_defers_to_the_groups_trigger_on_the_operators_connections() -> None:
    task = capture(source_conn_id="replica", poll_interval=0.5)
    with pytest.raises(TaskDeferred) as deferred:
        task.execute(context())
    trigger = deferred.value.trigger
    assert isinstance(trigger, GroupChangesTrigger) and deferred.value.method_name == "execute_complete"
    assert trigger.serialize()[1] == {"group": "bank", "tables": ["public.accounts"], "source_conn_id": "replica",
                                      "catalog_conn_id": "lake", "poll_interval": 0.5}


@pytest.mark.parametrize(("try_number", "params", "options"), [
    (2, {}, {}),  # a retry or a clear resumes the run's pinned W at once
    (1, {}, {"watermark_lsn": "0/16B3748"}),
    (1, {"resync": True}, {}),
    (1, {"resync_members": ["accounts"]}, {}),
    (1, {}, {"resync_members": ["accounts"]}),
])
def test_retries_explicit_watermarks_and_resyncs_do_not_wait(try_number: int, params: dict[str, Any],
                                                             options: dict[str, Any]) -> None:
    assert not capture(**options).waits_for_changes(context(try_number, **params))

