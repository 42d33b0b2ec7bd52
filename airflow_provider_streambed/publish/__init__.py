"""Publishing cuts: one atomic commit of every member table plus the cut's ledger rows.

Runs in the Airflow worker's publish task (and ``refresh_once``), the process that holds the
catalog's credentials; every pyiceberg internal it needs is fenced in :mod:`.iceberg`.
"""

from __future__ import annotations

from airflow_provider_streambed.publish.cut import check_before_run, check_capability, publish_cut

__all__ = ["check_before_run", "check_capability", "publish_cut"]
