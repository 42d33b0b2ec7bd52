"""Airflow metrics of a refresh group: the capture's figures and the group's freshness.

Sent through Airflow's metrics backend (StatsD, OpenTelemetry, ...) under its prefix, tagged
``group`` where the backend takes tags; a no-op when Airflow has no metrics backend configured.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_streambed.compat.airflow import gauge
from airflow_provider_streambed.ledger import Ledger

#: Figures of the capture summary sent as Airflow gauges ``streambed.<group>.<figure>``.
METRIC_FIGURES = ("holdback_count", "holdback_oldest_age_seconds", "transactions", "changes")


def emit_metrics(group: str, summary: dict[str, Any]) -> None:
    """Send the capture's holdback and volume figures to Airflow's metrics backend (StatsD, OTel...).

    Gauges ``streambed.<group>.holdback_count``, ``...holdback_oldest_age_seconds``,
    ``...transactions`` and ``...changes``, tagged ``group`` where the backend takes tags; a no-op
    when Airflow has no metrics backend configured.
    """
    for figure in METRIC_FIGURES:
        gauge(f"streambed.{group}.{figure}", summary[figure], tags={"group": group})


def emit_copy_progress(group: str, member: str, copied_rows: int) -> None:
    """Send a bootstrap copy's progress: gauge ``streambed.<group>.<member>.copied_rows`` (the member
    in the name, for backends without tags), tagged ``group`` and ``member``."""
    gauge(f"streambed.{group}.{member}.copied_rows", copied_rows, tags={"group": group, "member": member})


def emit_freshness(ledger: Ledger, group: str) -> None:
    """Send the group's freshness as gauges of UNIX times, also after runs that found nothing new.

    ``streambed.<group>.source_checked_at`` (when a run last checked the source successfully,
    published or unchanged) and ``streambed.<group>.last_cut_published_at``; an alert on their
    age catches a stuck group, and a quiet source does not look stale.
    """
    checked, cut = ledger.last_check(group), ledger.last_cut(group)
    figures = {
        "source_checked_at": checked.pinned_at if checked else None,
        "last_cut_published_at": cut.published_at if cut else None,
    }
    for figure, moment in figures.items():
        if moment is not None:
            gauge(f"streambed.{group}.{figure}", moment.timestamp(), tags={"group": group})
