"""The task plan of a refresh group: plain records, derived from the declaration alone.

:func:`plan_tasks` needs no Airflow and no scheduler (it is unit-tested on declarations);
:mod:`airflow_provider_streambed.task_group` turns each record into one operator.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from airflow_provider_streambed.declarations import RefreshGroup

StepKind = Literal["capture", "refresh", "publish"]

CAPTURE_TASK_ID = "capture_watermark"
REFRESH_TASK_ID = "refresh_group"
PUBLISH_TASK_ID = "publish_cut"


@dataclass(frozen=True, slots=True)
class PlannedTask:
    """One task of a group's run.

    Attributes:
        task_id: the task id inside the task group.
        kind: which step the task runs.
        upstream: task ids (inside the group) that must finish first.
        trigger_rule: the Airflow trigger rule, as its string value.
        members: the members the task computes or publishes, in dependency order.
        sources: the source tables the task reads (capture only).
    """

    task_id: str
    kind: StepKind
    upstream: tuple[str, ...]
    trigger_rule: str
    members: tuple[str, ...]
    sources: tuple[str, ...] = ()


def plan_tasks(group: RefreshGroup) -> tuple[PlannedTask, ...]:
    """The three tasks of a run of ``group``: capture, then one refresh, then publish.

    One Spark application computes every member (one JVM per run); publish waits for it with
    ``all_success``, so a failed member publishes nothing.
    """
    members = tuple(member.name for member in group.topological_members())
    return (
        PlannedTask(
            task_id=CAPTURE_TASK_ID,
            kind="capture",
            upstream=(),
            trigger_rule="all_success",
            members=tuple(mirror.name for mirror in group.mirrors),
            sources=tuple(mirror.qualified_table for mirror in group.mirrors),
        ),
        PlannedTask(REFRESH_TASK_ID, "refresh", (CAPTURE_TASK_ID,), "all_success", members),
        PlannedTask(PUBLISH_TASK_ID, "publish", (REFRESH_TASK_ID,), "all_success", members),
    )
