"""The capture figures reach Airflow's StatsD backend: read off a real UDP socket."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from airflow.sdk.observability import stats
from airflow.sdk.observability.metrics.stats_utils import get_stats_factory

from airflow_provider_streambed.operators.capture import emit_metrics

SUMMARY = {"holdback_count": 2, "holdback_oldest_age_seconds": 75.5, "transactions": 12, "changes": 340,
           "watermark": "0/16B3748", "holdback_probe_failed": False}


@pytest.fixture
def statsd_socket(monkeypatch: pytest.MonkeyPatch) -> Iterator[socket.socket]:
    """A UDP socket Airflow's StatsD backend sends to (``[metrics] statsd_on``)."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    listener.bind(("127.0.0.1", 0))
    listener.settimeout(5)
    monkeypatch.setenv("AIRFLOW__METRICS__STATSD_ON", "True")
    monkeypatch.setenv("AIRFLOW__METRICS__STATSD_HOST", "127.0.0.1")
    monkeypatch.setenv("AIRFLOW__METRICS__STATSD_PORT", str(listener.getsockname()[1]))
    stats.initialize(factory=get_stats_factory(), export_legacy_names=False)
    yield listener
    monkeypatch.delenv("AIRFLOW__METRICS__STATSD_ON")
    stats.initialize(factory=get_stats_factory(), export_legacy_names=False)  # back to no metrics
    listener.close()


def test_capture_figures_are_sent_as_gauges(statsd_socket: socket.socket) -> None:
    emit_metrics("bank", SUMMARY)
    received = sorted(statsd_socket.recv(512).decode() for _ in range(4))
    assert received == [
        "airflow.streambed.bank.changes:340|g",
        "airflow.streambed.bank.holdback_count:2|g",
        "airflow.streambed.bank.holdback_oldest_age_seconds:75.5|g",
        "airflow.streambed.bank.transactions:12|g",
    ]
