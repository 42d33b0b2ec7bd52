"""Fixtures of the REST catalog tests: a throwaway SeaweedFS server (S3 and Iceberg REST catalog)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from airflow_provider_streambed.testing.seaweed import ThrowawaySeaweed


@pytest.fixture
def seaweed() -> Iterator[ThrowawaySeaweed]:
    """A started SeaweedFS server of its own for the test, stopped and removed after it."""
    with ThrowawaySeaweed() as server:
        yield server


@pytest.fixture
def rest_properties(seaweed: ThrowawaySeaweed) -> dict[str, str]:
    """pyiceberg ``load_catalog`` properties of the test's SeaweedFS REST catalog."""
    return seaweed.catalog_properties()
