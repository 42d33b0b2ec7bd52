"""Every templated field of the three operators renders; parsing opens no connection and checks arguments."""

from __future__ import annotations

import pendulum
import pytest
from airflow.sdk import DAG

from airflow_provider_streambed import Mirror, RefreshGroup
from airflow_provider_streambed.exceptions import DeclarationError, InvalidWatermarkError, is_final
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.operators.capture import CaptureWatermarkOperator, explicit_watermark
from airflow_provider_streambed.operators.publish import PublishCutOperator
from airflow_provider_streambed.operators.refresh import RefreshGroupOperator
from airflow_provider_streambed.task_group import WATERMARK_TEMPLATE

GROUP = RefreshGroup(name="bank", source_conn_id="bank_pg", catalog_conn_id="lake", namespace="bank",
                     members=[Mirror("accounts")])
CONTEXT = {"params": {"watermark_lsn": "0/16B3748", "env": "prod"}, "ds": "2026-11-23"}


def _dag() -> DAG:
    return DAG("templates", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"))


def test_capture_renders_connection_ids_and_the_watermark_param() -> None:
    with _dag():
        task = CaptureWatermarkOperator(task_id="c", group=GROUP, source_conn_id="src_{{ params.env }}",
                                        catalog_conn_id="lake_{{ params.env }}", watermark_lsn=WATERMARK_TEMPLATE)
    task.render_template_fields(dict(CONTEXT))  # type: ignore[arg-type]  (a minimal context)
    assert (task.source_conn_id, task.catalog_conn_id, task.watermark_lsn) == ("src_prod", "lake_prod", "0/16B3748")


def test_capture_watermark_template_is_empty_without_the_param() -> None:
    with _dag():
        task = CaptureWatermarkOperator(task_id="c", group=GROUP, watermark_lsn=WATERMARK_TEMPLATE)
    task.render_template_fields({"params": {"watermark_lsn": None}})  # type: ignore[arg-type]
    assert task.watermark_lsn == ""
    assert task.source_conn_id == "bank_pg"


def test_refresh_renders_spark_connection_and_conf() -> None:
    with _dag():
        task = RefreshGroupOperator(task_id="r", group=GROUP, spark_conn_id="spark_{{ params.env }}",
                                    conf={"spark.app.tag": "{{ ds }}"})
    task.render_template_fields(dict(CONTEXT))  # type: ignore[arg-type]
    assert (task.spark_conn_id, task.conf, task.catalog_conn_id) == ("spark_prod", {"spark.app.tag": "2026-11-23"},
                                                                     "lake")


def test_publish_renders_connection_ids() -> None:
    with _dag():
        task = PublishCutOperator(task_id="p", group=GROUP, source_conn_id="{{ params.env }}_pg")
    task.render_template_fields(dict(CONTEXT))  # type: ignore[arg-type]
    assert task.source_conn_id == "prod_pg"
    assert task.trigger_rule == "all_success"
    assert task.doc_md is not None and "all_success" in task.doc_md


def test_capture_checks_its_slot_timeout_and_copy_parallelism_when_the_dag_file_is_parsed() -> None:
    with _dag():
        assert CaptureWatermarkOperator(task_id="c", group=GROUP).slot_create_timeout_seconds == 600.0
        with pytest.raises(DeclarationError,
                           match="slot_create_timeout_seconds must be a number of seconds > 0, got 0") as timeout:
            CaptureWatermarkOperator(task_id="d", group=GROUP, slot_create_timeout_seconds=0)
        with pytest.raises(DeclarationError, match="copy_parallelism must be at least 1, not 0") as parallelism:
            CaptureWatermarkOperator(task_id="e", group=GROUP, copy_parallelism=0)
    assert is_final(timeout.value) and isinstance(timeout.value, ValueError) and is_final(parallelism.value)


def test_a_rendered_watermark_that_is_not_an_lsn_fails_for_good() -> None:
    assert explicit_watermark(GROUP, " 0/16b3748 ") == Lsn.parse("0/16B3748")
    assert explicit_watermark(GROUP, "") is None and explicit_watermark(GROUP, "None") is None
    with pytest.raises(InvalidWatermarkError, match=r"group 'bank': watermark_lsn 'yesterday' is not an LSN") as bad:
        explicit_watermark(GROUP, "yesterday")
    assert is_final(bad.value)
