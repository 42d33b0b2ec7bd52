"""``StreambedRefreshGroup``: a TaskGroup running ``capture_watermark >> refresh_group >> publish_cut``."""

from __future__ import annotations

import logging
from typing import Any

from airflow.sdk import BaseOperator, Param, TaskGroup

from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.exceptions import DeclarationError
from airflow_provider_streambed.operators.capture import (
    RESYNC_MEMBERS_PARAM,
    RESYNC_PARAM,
    SUPERSEDE_PARAM,
    CaptureWatermarkOperator,
)
from airflow_provider_streambed.operators.publish import PublishCutOperator
from airflow_provider_streambed.operators.refresh import RefreshGroupOperator
from airflow_provider_streambed.task_plan import PlannedTask, plan_tasks

logger = logging.getLogger(__name__)

WATERMARK_PARAM = "watermark_lsn"
#: Capture's ``watermark_lsn``: the trigger form's Param, empty when not given.
WATERMARK_TEMPLATE = "{{ params.watermark_lsn or '' }}"

_OPERATORS: dict[str, type[BaseOperator]] = {
    "capture": CaptureWatermarkOperator,
    "refresh": RefreshGroupOperator,
    "publish": PublishCutOperator,
}


def watermark_param() -> Param:
    """The optional trigger-form Param for an explicit W."""
    return Param(
        None,
        type=["null", "string"],
        pattern=r"^[0-9A-Fa-f]{1,8}/[0-9A-Fa-f]{1,8}$",
        title="Watermark LSN (optional)",
        description="Pin this run's W explicitly, e.g. 0/16B3748 (for every streambed group of this DAG). "
        "Empty: the source's current WAL position. A W below the last published cut is refused.",
    )


#: The trigger form's checkboxes (off by default): Param name -> (title, description).
CHECKBOX_PARAMS = {
    SUPERSEDE_PARAM: (
        "Supersede a pending run",
        "When an earlier run of the group failed and was not retried, its pinned W blocks new runs. "
        "Tick to abandon that run (it is never published) and let this run pin a new W.",
    ),
    RESYNC_PARAM: (
        "Resync (copy every table again)",
        "Only when a run failed because the group's replication slot was lost or dropped: this run "
        "copies every table again at a new slot and publishes the copies as a new cut. Older cuts stay readable.",
    ),
}


def resync_members_param() -> Param:
    """The optional trigger-form Param naming mirrors to copy again in the run's cut."""
    return Param(
        [],
        type="array",
        items={"type": "string"},
        title="Resync members (optional)",
        description="Mirror names to copy again in this run's cut (for example after a manual fix on the source, "
        "or a suspected drift): each is copied at a snapshot consistent with the run's W and published whole; "
        "the other members keep merging. Older cuts stay readable.",
    )


def trigger_params() -> dict[str, Param]:
    """The trigger-form Params every streambed group adds to its DAG (once per DAG)."""
    checkboxes = {name: Param(False, type="boolean", title=title, description=description)
                  for name, (title, description) in CHECKBOX_PARAMS.items()}
    return {WATERMARK_PARAM: watermark_param(), **checkboxes, RESYNC_MEMBERS_PARAM: resync_members_param()}


class StreambedRefreshGroup(TaskGroup):
    """Run one refresh of a group: pin W and capture, refresh all members, publish the cut.

    Works inside ``@dag`` functions and ``with DAG(...)`` blocks. The run key is
    ``(dag_id, run_id)``, so retries and clears reuse the W pinned in the ledger. Runs of one
    group are serialised by the ledger: a second run's capture fails while another run of the
    group is pinned and unpublished (the trigger-form Param ``supersede_pending_runs``, or
    ``capture_options={"supersede_pending_runs": True}``, abandons that run instead).
    Use ``max_active_runs=1`` on the DAG.

    Args:
        group: the refresh-group declaration.
        spark_conn_id: the Spark connection the refresh job is submitted to.
        group_id: the task group id (default: the group's name).
        spark_conf: Spark configuration for the job.
        spark_options: further ``RefreshGroupOperator`` arguments (``executor_memory``, ...).
        capture_options: further ``CaptureWatermarkOperator`` arguments.
        publish_options: further ``PublishCutOperator`` arguments.
        task_per_member: one refresh task per member (``refresh_<member>``, after its sources'
            tasks) instead of one for all: the UI shows each member, and clearing a failed member
            task recomputes that member only, with the same W. Best with a ``spark_connect``
            connection (no JVM start per task); with spark-submit each task starts an application.
        **kwargs: ``TaskGroup`` arguments (``tooltip``, ``default_args``, ...).
    """

    def __init__(
        self,
        group: RefreshGroup,
        *,
        spark_conn_id: str = "spark_default",
        group_id: str | None = None,
        spark_conf: dict[str, Any] | None = None,
        spark_options: dict[str, Any] | None = None,
        capture_options: dict[str, Any] | None = None,
        publish_options: dict[str, Any] | None = None,
        task_per_member: bool = False,
        **kwargs: Any,
    ) -> None:
        if not isinstance(group, RefreshGroup):
            raise DeclarationError(f"StreambedRefreshGroup needs a RefreshGroup declaration, got {group!r}")
        kwargs.setdefault("tooltip", f"streambed group {group.name!r}: capture, refresh, publish one cut")
        super().__init__(group_id=group_id or group.name, **kwargs)
        self.refresh_declaration = group
        options = {
            "capture": {"watermark_lsn": WATERMARK_TEMPLATE, **(capture_options or {})},
            "refresh": {"spark_conn_id": spark_conn_id, "conf": spark_conf, **(spark_options or {})},
            "publish": dict(publish_options or {}),
        }
        for name, param in trigger_params().items():
            if name not in self.dag.params:
                self.dag.params[name] = param
        tasks: dict[str, BaseOperator] = {}
        for planned in plan_tasks(group, task_per_member):
            extra = {"members": planned.members} if task_per_member and planned.kind == "refresh" else {}
            tasks[planned.task_id] = self._make_task(planned, {**options[planned.kind], **extra})
            for upstream in planned.upstream:
                tasks[upstream] >> tasks[planned.task_id]

    def _make_task(self, planned: PlannedTask, options: dict[str, Any]) -> BaseOperator:
        operator = _OPERATORS[planned.kind]
        return operator(
            task_id=planned.task_id,
            group=self.refresh_declaration,
            trigger_rule=planned.trigger_rule,
            task_group=self,
            **options,
        )
