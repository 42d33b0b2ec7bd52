"""The DAG of the browser test against a real Airflow (``test_ui_real_airflow.py``): the bank's
mirrors, run by hand only.

A run triggered with the Param ``fail_refresh_once`` fails its refresh on the first try (before the
refresh starts: no retries, so the run fails and waits for a person); a cleared run's next try
refreshes. Mirrors only: every refresh merges in-process, no Spark.
"""

from __future__ import annotations

from typing import Any

import pendulum
from airflow.sdk import DAG, Param

from airflow_provider_streambed import Mirror, RefreshGroup, StreambedRefreshGroup

FAIL_PARAM = "fail_refresh_once"

bank_ui = RefreshGroup(
    name="bank_ui",
    source_conn_id="bank_pg",
    catalog_conn_id="lakehouse",
    namespace="bank_ui",
    members=[Mirror("public.accounts"), Mirror("public.transfers")],
)


def fail_first_try(context: Any) -> None:
    """The refresh's ``pre_execute``: fail the first try of a run triggered with ``fail_refresh_once``."""
    if context["params"].get(FAIL_PARAM) and context["ti"].try_number == 1:
        raise RuntimeError(f"{FAIL_PARAM}: the refresh fails on its first try, as the run asked")


with DAG(
    dag_id="streambed_ui",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    params={FAIL_PARAM: Param(False, type="boolean", title="Fail the refresh's first try")},
):
    StreambedRefreshGroup(bank_ui, spark_options={"pre_execute": fail_first_try})
