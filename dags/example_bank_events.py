"""Example: the bank's mirrors refreshed seconds after each commit, scheduled by a change trigger.

The group's source-changes Asset is watched in Airflow's triggerer by
:class:`~airflow_provider_streambed.triggers.changes.GroupChangesTrigger`: it polls the source's
table counters every 2 s (no replication slot, no decoding) and fires once per new state of
commits the group's last cut does not hold, so the DAG runs after a commit and never on a quiet
source. A mirrors-only group starts no Spark: each run merges in-process. Needs a running
triggerer (``airflow triggerer``).
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from airflow_provider_streambed import Mirror, RefreshGroup, StreambedRefreshGroup
from airflow_provider_streambed.triggers.changes import group_asset

# [START bank_events_group]
bank_live = RefreshGroup(
    name="bank_live",
    source_conn_id="bank_pg",
    catalog_conn_id="lakehouse",
    namespace="bank_live",
    members=[Mirror("public.accounts"), Mirror("public.transfers")],
)
# [END bank_events_group]

# [START bank_events_dag]
with DAG(
    dag_id="streambed_bank_events",
    schedule=[group_asset(bank_live, poll_interval=2.0)],  # runs when the source tables have new commits
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,  # events that arrive while a run is going collapse into the next run
    tags=["streambed", "example"],
    doc_md=__doc__,
) as dag:
    StreambedRefreshGroup(bank_live, default_args={"retries": 2, "retry_delay": pendulum.duration(seconds=30)})
# [END bank_events_dag]
