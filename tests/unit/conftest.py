"""Unit-test fixtures: every test starts with no object store configured (storage's registry is the process's)."""

from __future__ import annotations

import pytest

from airflow_provider_streambed import storage


@pytest.fixture(autouse=True)
def _no_configured_stores(monkeypatch: pytest.MonkeyPatch) -> None:
    """An empty registry of object stores, whatever catalogs earlier tests of the session opened."""
    monkeypatch.setattr(storage, "_configured", {})
