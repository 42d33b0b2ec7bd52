"""One ``refresh_once`` of the example bank group in its own process, killed (SIGKILL) at a chosen point.

Usage: ``python -m tests.integration.airflow.kill_worker <point> <catalog props json> <run key>``,
with the source DSN in ``STREAMBED_SOURCE_DSN`` (and a Spark Connect URL in
``STREAMBED_SPARK_REMOTE`` to refresh there instead of through spark-submit). The points (a patched function kills the
process, as a crash of the machine would):

- ``copy``: the first run's bootstrap copies are written, not yet recorded;
- ``extract``: W is pinned and the changelogs are written, the capture manifest is not;
- ``before-publish``: every member is staged, publish has not started;
- ``publish-move``: publish moved the first member's files into its table, not the others';
- ``slot-advance``: the cut is published, the slot is not advanced;
- ``none``: nothing is patched (the test kills the process group itself, e.g. during Spark).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from airflow_provider_streambed import steps as steps_module
from airflow_provider_streambed.capture import bootstrap as bootstrap_module
from airflow_provider_streambed.capture import run as capture_run_module
from airflow_provider_streambed.local import refresh_once
from airflow_provider_streambed.publish import sql as publish_sql

DAGS = Path(__file__).resolve().parents[3] / "dags"


def die(*args: Any, **kwargs: Any) -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def then_die(function: Any) -> Any:
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        function(*args, **kwargs)
        die()

    return wrapped


def die_on_second_call(function: Any) -> Any:
    calls: list[None] = []

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if calls:
            die()
        calls.append(None)
        return function(*args, **kwargs)

    return wrapped


def main() -> None:
    point, props, run_key = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
    patches: dict[str, tuple[object, str, Any]] = {
        "copy": (bootstrap_module, "write_marker", die),
        "extract": (capture_run_module, "extract_changes", then_die(capture_run_module.extract_changes)),
        "before-publish": (steps_module, "publish_cut", die),
        "publish-move": (publish_sql, "move_staged_files", die_on_second_call(publish_sql.move_staged_files)),
        "slot-advance": (steps_module, "advance_slot", die),
    }
    if point in patches:
        module, name, replacement = patches[point]
        setattr(module, name, replacement)
    elif point != "none":
        raise SystemExit(f"unknown point {point!r}")
    sys.path.insert(0, str(DAGS))
    from example_bank import bank

    refresh_once(bank, source_dsn=os.environ["STREAMBED_SOURCE_DSN"], catalog_properties=props, run_key=run_key,
                 spark_remote=os.environ.get("STREAMBED_SPARK_REMOTE"))


if __name__ == "__main__":
    main()
