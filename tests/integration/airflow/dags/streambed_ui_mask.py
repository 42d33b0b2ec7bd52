"""A DAG of the test against a real Airflow (``test_ui_real_airflow.py``) that logs the source's
connection string on purpose, so that its task log shows Airflow masking the secrets the source
hook registers (the provider itself never logs them)."""

from __future__ import annotations

import logging

import pendulum
from airflow.sdk import DAG, task

from airflow_provider_streambed.hooks.source import StreambedSourceHook

#: The words before the connection string in the task's log line.
LOGGED = "the source's connection string, logged on purpose:"

with DAG(dag_id="streambed_ui_mask", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
         catchup=False):

    @task
    def log_source_connection() -> None:
        """Resolve the source connection as a capture does, then log its connection string."""
        logging.getLogger(__name__).info("%s %s", LOGGED, StreambedSourceHook("bank_pg").conninfo)

    log_source_connection()
