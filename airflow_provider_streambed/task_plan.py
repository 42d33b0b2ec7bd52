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


def member_task_id(member: str) -> str:
    """The task id of a member's refresh task when the group runs a task per member."""
    return f"refresh_{member}"


def plan_tasks(group: RefreshGroup, task_per_member: bool = False) -> tuple[PlannedTask, ...]:
    """The tasks of a run of ``group``: capture, then the refresh, then publish.

    By default one refresh task computes every member (one Spark application per run). With
    ``task_per_member`` each member has its own refresh task (``refresh_<member>``), after the
    capture and after the tasks of its sources, so the UI shows and retries members one by one.
    Publish waits for every refresh task with ``all_success``, so a failed member publishes nothing.
    """
    members = tuple(member.name for member in group.topological_members())
    capture = PlannedTask(
        task_id=CAPTURE_TASK_ID,
        kind="capture",
        upstream=(),
        trigger_rule="all_success",
        members=tuple(mirror.name for mirror in group.mirrors),
        sources=tuple(mirror.qualified_table for mirror in group.mirrors),
    )
    if not task_per_member:
        return (
            capture,
            PlannedTask(REFRESH_TASK_ID, "refresh", (CAPTURE_TASK_ID,), "all_success", members),
            PlannedTask(PUBLISH_TASK_ID, "publish", (REFRESH_TASK_ID,), "all_success", members),
        )
    refreshes = tuple(
        PlannedTask(
            member_task_id(member.name),
            "refresh",
            (CAPTURE_TASK_ID, *(member_task_id(group.member(source).name) for source in member.sources)),
            "all_success",
            (member.name,),
        )
        for member in group.topological_members()
    )
    publish = PlannedTask(PUBLISH_TASK_ID, "publish", tuple(task.task_id for task in refreshes), "all_success",
                          members)
    return (capture, *refreshes, publish)
