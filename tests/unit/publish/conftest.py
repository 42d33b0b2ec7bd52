"""Fixtures for the publish unit tests: a fake Iceberg REST server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.unit.publish.fake_rest import FakeServer, serving


@pytest.fixture
def server() -> Iterator[FakeServer]:
    """A fake REST server (:mod:`tests.unit.publish.fake_rest`) for the test's duration."""
    with serving() as fake:
        yield fake
