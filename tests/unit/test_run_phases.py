"""``make live``'s breakdown of where a run's time goes (scripts/run_phases.py), from API records."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "run_phases.py"
_spec = importlib.util.spec_from_file_location("run_phases", SCRIPT)
assert _spec is not None and _spec.loader is not None
run_phases_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(run_phases_module)


def at(seconds: float) -> str:
    return f"2026-11-26T17:00:{seconds:06.3f}+00:00"


def task(run_id: str, name: str, queued: float, started: float, ended: float | None) -> dict[str, object]:
    return {"dag_run_id": run_id, "task_id": f"streambed_bank_live.{name}", "queued_when": at(queued),
            "start_date": at(started), "end_date": at(ended) if ended is not None else None}


def test_each_phase_of_a_finished_run() -> None:
    runs = [{"dag_run_id": "r1", "queued_at": at(1), "end_date": at(9)},
            {"dag_run_id": "r2", "queued_at": at(20), "end_date": None}]  # still running: left out
    instances = [task("r1", "publish", 6.5, 7, 8.5), task("r1", "capture", 1.5, 2, 3),
                 task("r1", "refresh", 3.25, 4, 6), task("r2", "capture", 21, 22, None)]
    events = [{"timestamp": at(0.5), "created_dagruns": [{"run_id": "r1"}]},
              {"timestamp": at(0.25), "created_dagruns": [{"run_id": "r1"}]},  # the earliest counts
              {"timestamp": at(19), "created_dagruns": []}]

    phases = run_phases_module.run_phases(runs, instances, events)

    assert phases == {
        "scheduler: first event -> run queued": [0.75],
        "scheduler: -> capture queued": [0.5], "capture: queued -> running": [0.5], "capture: running": [1.0],
        "scheduler: -> refresh queued": [0.25], "refresh: queued -> running": [0.75], "refresh: running": [2.0],
        "scheduler: -> publish queued": [0.5], "publish: queued -> running": [0.5], "publish: running": [1.5],
        "run: queued -> done": [8.0],
    }
    lines = run_phases_module.summary(phases)
    assert lines[1].split() == ["scheduler:", "first", "event", "->", "run", "queued", "0.75", "0.75", "1"]
