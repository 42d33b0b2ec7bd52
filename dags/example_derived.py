"""Example: a derived table computed by a PySpark function, refreshed as one cut with its source.

Written with the ``@dag`` decorator (``example_bank.py`` uses ``with DAG``). The function lives
in an importable module (here ``airflow_provider_streambed.examples.bank_derived``): the Spark
driver imports it, so it must be installed where Spark runs, not only in the DAG folder.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import dag

from airflow_provider_streambed import Mirror, PythonMember, RefreshGroup, StreambedRefreshGroup

# [START derived_group]
payments = RefreshGroup(
    name="bank_senders",
    source_conn_id="bank_pg",
    catalog_conn_id="lakehouse",
    namespace="bank_derived",
    members=[
        Mirror("public.transfers"),
        PythonMember(
            "sender_totals",
            "airflow_provider_streambed.examples.bank_derived:sender_totals",
            sources=["transfers"],
        ),
    ],
)


@dag(
    schedule="@hourly",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    tags=["streambed", "example"],
)
def streambed_bank_senders() -> None:
    """Refresh ``transfers`` and ``sender_totals`` as one cut every hour."""
    StreambedRefreshGroup(payments, spark_conn_id="spark_default")


streambed_bank_senders()
# [END derived_group]
