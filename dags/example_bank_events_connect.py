"""Example: the bank's mirrors and its derived ``balances`` fresh within seconds of each commit.

As ``example_bank_events.py``, the group's source-changes Asset schedules the DAG, and a run
starts seconds after a commit. The derived ``balances`` member is computed on a Spark Connect
server that stays up between runs (connection ``spark_connect`` of type ``spark_connect``; for a
local one, ``streambed spark-connect start``), so no run waits for a JVM to start; the mirrors
merge in-process. Needs a running triggerer and that server.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from airflow_provider_streambed import Mirror, RefreshGroup, SqlMember, StreambedRefreshGroup
from airflow_provider_streambed.examples.bank import BALANCES_SQL
from airflow_provider_streambed.triggers.changes import group_asset

# [START bank_connect_group]
bank_fresh = RefreshGroup(
    name="bank_fresh",
    source_conn_id="bank_pg",
    catalog_conn_id="lakehouse",
    namespace="bank_fresh",
    members=[
        Mirror("public.accounts"),
        Mirror("public.transfers"),
        SqlMember("balances", BALANCES_SQL, sources=["accounts", "transfers"]),
    ],
)
# [END bank_connect_group]

# [START bank_connect_dag]
with DAG(
    dag_id="streambed_bank_events_connect",
    schedule=[group_asset(bank_fresh, poll_interval=2.0)],  # runs when the source tables have new commits
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,  # events that arrive while a run is going collapse into the next run
    tags=["streambed", "example"],
    doc_md=__doc__,
) as dag:
    StreambedRefreshGroup(bank_fresh, spark_conn_id="spark_connect",
                          default_args={"retries": 2, "retry_delay": pendulum.duration(seconds=30)})
# [END bank_connect_dag]
