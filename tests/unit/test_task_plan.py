"""The task plan is derived from the declaration alone (no Airflow, no scheduler)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from airflow_provider_streambed import Mirror, PythonMember, RefreshGroup, SqlMember
from airflow_provider_streambed.task_plan import plan_tasks

ROOT = Path(__file__).resolve().parents[2]


def _group() -> RefreshGroup:
    return RefreshGroup(
        name="shop",
        source_conn_id="src",
        catalog_conn_id="lake",
        namespace="shop",
        members=[
            SqlMember("totals", "SELECT * FROM orders", sources=["orders"]),
            Mirror("sales.orders"),
            PythonMember("scores", "pkg.mod:fn", sources=["totals"]),
            Mirror("customers"),
        ],
    )


def test_plan_is_capture_then_refresh_then_publish() -> None:
    plan = plan_tasks(_group())
    assert [(task.task_id, task.kind, task.upstream) for task in plan] == [
        ("capture_watermark", "capture", ()),
        ("refresh_group", "refresh", ("capture_watermark",)),
        ("publish_cut", "publish", ("refresh_group",)),
    ]
    assert {task.trigger_rule for task in plan} == {"all_success"}


def test_capture_reads_the_mirrored_tables_only() -> None:
    capture = plan_tasks(_group())[0]
    assert capture.members == ("orders", "customers")
    assert capture.sources == ("sales.orders", "public.customers")


def test_refresh_and_publish_cover_every_member_in_dependency_order() -> None:
    refresh, publish = plan_tasks(_group())[1:]
    assert refresh.members == ("orders", "totals", "scores", "customers")
    assert publish.members == refresh.members


MIRRORS = ("ledger", "accounts", "branches", "cards", "loans", "rates", "fees", "users")


def _wide_group() -> RefreshGroup:
    """A member declared before its eight sources: no order but the declaration's ties them."""
    return RefreshGroup(name="bank", source_conn_id="src", catalog_conn_id="lake", namespace="bank",
                        members=[SqlMember("summary", "SELECT 1", sources=list(reversed(MIRRORS))),
                                 *(Mirror(name) for name in MIRRORS)])


def _plan_rows() -> list[list[Any]]:
    """The task-per-member plan of :func:`_wide_group` as JSON rows: task id, upstream, members."""
    return [[task.task_id, list(task.upstream), list(task.members)]
            for task in plan_tasks(_wide_group(), task_per_member=True)]


def test_the_plan_follows_the_declaration_in_every_process() -> None:
    """The scheduler and each worker parse the DAG file in processes with their own string hashes:
    the plan must come out the same in all of them, never in the order of a set."""
    refreshes = [[f"refresh_{name}", ["capture_watermark"], [name]] for name in MIRRORS]
    summary = ["refresh_summary", ["capture_watermark", *(f"refresh_{name}" for name in reversed(MIRRORS))],
               ["summary"]]
    expected = [["capture_watermark", [], list(MIRRORS)], *refreshes, summary,
                ["publish_cut", [f"refresh_{name}" for name in (*MIRRORS, "summary")], [*MIRRORS, "summary"]]]
    assert _plan_rows() == expected
    code = "import json, tests.unit.test_task_plan as t; print(json.dumps(t._plan_rows()))"
    for seed in ("0", "1", "2", "3"):
        done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**os.environ, "PYTHONHASHSEED": seed},
                              capture_output=True, text=True, check=True)
        assert json.loads(done.stdout) == expected, f"PYTHONHASHSEED={seed} planned another order"


def test_a_task_per_member_follows_the_sources() -> None:
    plan = plan_tasks(_group(), task_per_member=True)
    assert [(task.task_id, task.upstream, task.members) for task in plan] == [
        ("capture_watermark", (), ("orders", "customers")),
        ("refresh_orders", ("capture_watermark",), ("orders",)),
        ("refresh_totals", ("capture_watermark", "refresh_orders"), ("totals",)),
        ("refresh_scores", ("capture_watermark", "refresh_totals"), ("scores",)),
        ("refresh_customers", ("capture_watermark",), ("customers",)),
        ("publish_cut", ("refresh_orders", "refresh_totals", "refresh_scores", "refresh_customers"),
         ("orders", "totals", "scores", "customers")),
    ]
    assert {task.trigger_rule for task in plan} == {"all_success"}
