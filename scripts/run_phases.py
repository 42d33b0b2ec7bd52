"""Where the time of an event-scheduled run goes, from Airflow's public REST API (``make live``).

Per DAG run, from its asset events, the run and its task instances: the scheduler's share (the
run's first event -> run queued, which holds the wait for the run before it under
``max_active_runs=1``; run queued -> first task queued; a task's end -> the next one queued), each
task's start (queued -> running: the executor and the task's process starting) and each task's
work (running -> done). :func:`run_phases` is pure; :class:`Api` reads the API.
"""

from __future__ import annotations

import json
import statistics
import urllib.request
from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

Record = Mapping[str, Any]


def _at(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text)


def run_phases(
    runs: Iterable[Record], task_instances: Iterable[Record], events: Iterable[Record]
) -> dict[str, list[float]]:
    """Seconds per phase, one figure per finished run that has them, in the order the phases happen.

    Args:
        runs: DAG runs (``dag_run_id``, ``queued_at``, ``end_date``).
        task_instances: their task instances (``dag_run_id``, ``task_id``, ``queued_when``,
            ``start_date``, ``end_date``).
        events: asset events (``timestamp``, ``created_dagruns`` with ``run_id``).
    """
    fired: dict[str, datetime] = {}
    for event in events:
        at = _time(event["timestamp"])
        for created in event.get("created_dagruns", []):
            if created["run_id"] not in fired or at < fired[created["run_id"]]:
                fired[created["run_id"]] = at
    tasks: dict[str, list[Record]] = defaultdict(list)
    for task in task_instances:
        if task.get("queued_when") and task.get("start_date") and task.get("end_date"):
            tasks[task["dag_run_id"]].append(task)
    phases: dict[str, list[float]] = defaultdict(list)
    for run in runs:
        queued, done, instances = _at(run.get("queued_at")), _at(run.get("end_date")), tasks[run["dag_run_id"]]
        if queued is None or done is None or not instances:
            continue
        if run["dag_run_id"] in fired:
            phases["scheduler: first event -> run queued"].append((queued - fired[run["dag_run_id"]]).total_seconds())
        previous: datetime = queued
        for task in sorted(instances, key=lambda task: task["start_date"]):
            name = task["task_id"].rsplit(".", 1)[-1]
            task_queued, started, ended = (_time(task[field]) for field in ("queued_when", "start_date", "end_date"))
            phases[f"scheduler: -> {name} queued"].append((task_queued - previous).total_seconds())
            phases[f"{name}: queued -> running"].append((started - task_queued).total_seconds())
            phases[f"{name}: running"].append((ended - started).total_seconds())
            previous = ended
        phases["run: queued -> done"].append((done - queued).total_seconds())
    return dict(phases)


def summary(phases: Mapping[str, list[float]]) -> list[str]:
    """A line per phase: its median and 90th percentile (seconds) and how many runs it covers."""
    lines = [f"{'phase':<40} {'p50 s':>7} {'p90 s':>7} {'runs':>5}"]
    for name, seconds in phases.items():
        p90 = statistics.quantiles(seconds, n=10)[8] if len(seconds) > 1 else seconds[0]
        lines.append(f"{name:<40} {statistics.median(seconds):>7.2f} {p90:>7.2f} {len(seconds):>5}")
    return lines


class Api:
    """Airflow's REST API at ``url``, with the simple auth manager's token for a deployment whose
    every user is an admin (as ``make live`` runs it)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.token = self.get("/auth/token", authorized=False)["access_token"]

    def get(self, path: str, authorized: bool = True) -> Any:
        """The JSON body of a GET of ``path``."""
        headers = {"Authorization": f"Bearer {self.token}"} if authorized else {}
        with urllib.request.urlopen(urllib.request.Request(f"{self.url}{path}", headers=headers), timeout=30) as got:
            return json.load(got)

    def listed(self, path: str, key: str) -> list[Record]:
        """Every item of a list endpoint (``key`` in its body), page by page: the API server gives
        at most ``[api] maximum_page_limit`` (100) items a page."""
        items: list[Record] = []
        while True:
            page = self.get(f"{path}{'&' if '?' in path else '?'}limit=100&offset={len(items)}")
            items += page[key]
            if not page[key] or len(items) >= page["total_entries"]:
                return items

    def runs(self, dag_id: str) -> list[Record]:
        """The DAG's runs."""
        return self.listed(f"/api/v2/dags/{dag_id}/dagRuns", "dag_runs")

    def phases(self, dag_id: str) -> dict[str, list[float]]:
        """:func:`run_phases` of the DAG's runs."""
        instances = self.listed(f"/api/v2/dags/{dag_id}/dagRuns/~/taskInstances", "task_instances")
        events = self.listed("/api/v2/assets/events", "asset_events")
        return run_phases(self.runs(dag_id), instances, events)
