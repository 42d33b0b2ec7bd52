"""The task plan is derived from the declaration alone (no Airflow, no scheduler)."""

from __future__ import annotations

from airflow_provider_streambed import Mirror, PythonMember, RefreshGroup, SqlMember
from airflow_provider_streambed.task_plan import plan_tasks


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


def test_plan_is_deterministic() -> None:
    assert plan_tasks(_group()) == plan_tasks(_group())


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
