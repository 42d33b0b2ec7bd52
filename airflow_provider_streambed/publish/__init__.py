"""Publishing cuts: one atomic commit of every member table plus the cut's ledger rows."""

from __future__ import annotations

from airflow_provider_streambed.publish.cut import check_before_run, check_capability, publish_cut

__all__ = ["check_before_run", "check_capability", "publish_cut"]
