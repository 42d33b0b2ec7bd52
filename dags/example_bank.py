"""Example: a bank whose accounts and transfers are published as transaction-consistent cuts.

Every cut of the ``bank`` group holds both tables at one source watermark, so the total money
over ``accounts`` never changes between cuts, and ``balances`` always agrees with the mirrored
tables of the same cut.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from airflow_provider_streambed import Mirror, RefreshGroup, SqlMember, StreambedRefreshGroup
from airflow_provider_streambed.examples.bank import BALANCES_SQL

# [START bank_group]
bank = RefreshGroup(
    name="bank",
    source_conn_id="bank_pg",
    catalog_conn_id="lakehouse",
    namespace="bank",
    members=[
        Mirror("public.accounts"),
        Mirror("public.transfers"),
        # per account: its balance and the net of its transfers (a GROUP BY over a LEFT JOIN)
        SqlMember("balances", BALANCES_SQL, sources=["accounts", "transfers"]),
    ],
)
# [END bank_group]

# [START bank_dag]
with DAG(
    dag_id="streambed_bank",
    schedule="*/15 * * * *",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,  # runs of one group are serialised anyway; this keeps the queue tidy
    tags=["streambed", "example"],
    doc_md=__doc__,
):
    StreambedRefreshGroup(bank, spark_conn_id="spark_default",
                          default_args={"retries": 2, "retry_delay": pendulum.duration(seconds=30)})
# [END bank_dag]
