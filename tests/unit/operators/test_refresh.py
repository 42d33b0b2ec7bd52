"""The refresh operator refuses a missing Spark connection instead of submitting to YARN."""

from __future__ import annotations

import json

import pytest

from airflow_provider_streambed import Mirror, RefreshGroup
from airflow_provider_streambed.exceptions import ConnectionConfigError
from airflow_provider_streambed.operators.refresh import RefreshGroupOperator

GROUP = RefreshGroup(name="bank", source_conn_id="bank_pg", catalog_conn_id="lake", namespace="bank",
                     members=[Mirror("accounts")])


def test_a_missing_spark_connection_is_refused_naming_it() -> None:
    task = RefreshGroupOperator(task_id="r", group=GROUP, spark_conn_id="no_such_spark")
    with pytest.raises(ConnectionConfigError, match=r"group 'bank': Spark connection 'no_such_spark' is not defined"):
        task.check_spark_connection()


def test_a_defined_spark_connection_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_MY_SPARK", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    RefreshGroupOperator(task_id="r", group=GROUP, spark_conn_id="my_spark").check_spark_connection()
