"""The retention around a publish: the planner handed to it, and the retention applied right after it."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from types import SimpleNamespace

import pytest
from pyiceberg.catalog.sql import SqlCatalog

from airflow_provider_streambed import CutRetention
from airflow_provider_streambed.ledger import Ledger
from airflow_provider_streambed.retention import maintenance
from airflow_provider_streambed.retention.maintenance import apply_retention_after_publish
from airflow_provider_streambed.retention.plan import publish_expiry
from tests.integration.publish.helpers import make_group

KEPT = dataclasses.replace(make_group(), retention=CutRetention(keep_last=3))


def test_without_a_retention_a_publish_expires_nothing_and_nothing_follows(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[object] = []
    monkeypatch.setattr(maintenance, "apply_retention", lambda *args, **kwargs: calls.append(args))
    assert publish_expiry(SimpleNamespace(), make_group()) is None  # type: ignore[arg-type]  # never read
    apply_retention_after_publish(SimpleNamespace(), SimpleNamespace(), make_group())  # type: ignore[arg-type]
    apply_retention_after_publish(SimpleNamespace(), SimpleNamespace(), KEPT)  # type: ignore[arg-type]  # not SQL
    assert calls == []


def test_the_retention_after_a_publish_logs_its_failure_and_never_raises(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    catalog = SqlCatalog("t", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=tmp_path.as_uri())
    ledger = Ledger(catalog.engine)
    seen: list[dict[str, object]] = []

    def fail(*args: object, **kwargs: object) -> None:
        seen.append(kwargs)
        raise OSError("disk gone")

    monkeypatch.setattr(maintenance, "apply_retention", fail)
    with caplog.at_level(logging.WARNING):
        apply_retention_after_publish(catalog, ledger, KEPT)
    assert seen == [{"after_publish": True}]
    assert "group=bank: retention after publish failed: disk gone" in caplog.text
