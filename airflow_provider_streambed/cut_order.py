"""The rule that orders a group's cuts: a run's W must be after the last cut's W.

One function, called by every path that could publish out of order (the refresh plan, the Spark
job, publish); the ledger keeps its own database guard beneath it. A run that breaks the rule can
never make a cut, whatever a retry does, so the error is final: the run is failed and frees the
group at once instead of burning Airflow's retries.
"""

from __future__ import annotations

from airflow_provider_streambed.exceptions import InvalidWatermarkError
from airflow_provider_streambed.lsn import Lsn


def check_after_last_cut(
    group: str, run_key: str, watermark: Lsn, last_watermark: Lsn | None, last_cut_id: int | None = None
) -> None:
    """Refuse a run whose W is not after the W of the group's last cut.

    Args:
        group: the group's name.
        run_key: the run's key.
        watermark: the run's W.
        last_watermark: the W of the group's last cut; ``None`` before the first cut.
        last_cut_id: that cut's id, for the message, when known.

    Raises:
        InvalidWatermarkError: ``watermark <= last_watermark`` (final).
    """
    if last_watermark is not None and watermark <= last_watermark:
        cut = "the last cut" if last_cut_id is None else f"cut {last_cut_id}"
        raise InvalidWatermarkError(
            f"group {group!r}, run {run_key!r}: W={watermark} is not after {cut}'s W={last_watermark}; a cut can "
            "only move forward, so this run can never publish (trigger a new run)"
        )
