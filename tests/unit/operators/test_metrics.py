"""The capture figures reach Airflow's StatsD backend: read off a real UDP socket."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_provider_streambed.compat.airflow import reload_metrics_backend
from airflow_provider_streambed.ledger import Ledger, RunState
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.operators.metrics import emit_copy_progress, emit_freshness, emit_metrics

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
    reload_metrics_backend()
    yield listener
    monkeypatch.delenv("AIRFLOW__METRICS__STATSD_ON")
    reload_metrics_backend()  # back to no metrics
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


def test_freshness_is_sent_after_an_unchanged_run(statsd_socket: socket.socket, tmp_path: Path) -> None:
    ledger = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    ledger.create()
    ledger.pin_run("bank", "run-1", Lsn(100))
    with ledger.begin() as connection:
        cut = ledger.record_cut(connection, "bank", "run-1", Lsn(100), {})
        ledger.mark_published(connection, "bank", "run-1", Lsn(100), cut.cut_id)
    unchanged = ledger.pin_run("bank", "run-2", Lsn(100))
    ledger.set_run_state("bank", "run-2", RunState.UNCHANGED, cut_id=1)
    emit_freshness(ledger, "bank")
    received = dict(statsd_socket.recv(512).decode().removesuffix("|g").split(":") for _ in range(2))
    assert float(received["airflow.streambed.bank.source_checked_at"]) == unchanged.pinned_at.timestamp()
    assert float(received["airflow.streambed.bank.last_cut_published_at"]) == cut.published_at.timestamp()
    assert unchanged.pinned_at > cut.published_at


def test_copy_progress_is_a_gauge_per_member(statsd_socket: socket.socket) -> None:
    emit_copy_progress("bank", "transfers", 1_250_000)
    assert statsd_socket.recv(512).decode() == "airflow.streambed.bank.transfers.copied_rows:1250000|g"
