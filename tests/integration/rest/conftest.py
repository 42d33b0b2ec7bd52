"""Fixtures of the REST catalog tests: a throwaway SeaweedFS server (S3 and Iceberg REST catalog), and
a throwaway Nessie (an Iceberg REST catalog on SeaweedFS's S3) shared by a module's tests, each on a
branch of its own."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from airflow_provider_streambed.testing.nessie import ThrowawayNessie
from airflow_provider_streambed.testing.seaweed import ThrowawaySeaweed


@pytest.fixture
def seaweed() -> Iterator[ThrowawaySeaweed]:
    """A started SeaweedFS server of its own for the test, stopped and removed after it."""
    with ThrowawaySeaweed() as server:
        yield server


@pytest.fixture(scope="module")
def nessie() -> Iterator[ThrowawayNessie]:
    """A started Nessie server (and the SeaweedFS of its warehouse) for the module's tests: its JVM
    takes seconds to start. Tests stay apart on branches of their own (:func:`rest_properties`)."""
    with ThrowawayNessie() as server:
        yield server


@pytest.fixture(params=["seaweed", pytest.param("nessie", marks=pytest.mark.cluster)])
def rest_server(request: pytest.FixtureRequest) -> str:
    """Which server is the test's REST catalog: ``seaweed`` or ``nessie``. A test that needs one
    says so: ``@pytest.mark.parametrize("rest_server", ["seaweed"])``."""
    return str(request.param)


@pytest.fixture
def rest_properties(rest_server: str, request: pytest.FixtureRequest) -> dict[str, str]:
    """pyiceberg ``load_catalog`` properties of the test's REST catalog: a SeaweedFS of its own, or a
    branch of its own (named after the test) on the module's Nessie."""
    if rest_server == "nessie":
        server: ThrowawayNessie = request.getfixturevalue("nessie")
        return server.catalog_properties(server.create_branch(request.node.name))
    seaweed: ThrowawaySeaweed = request.getfixturevalue("seaweed")
    return seaweed.catalog_properties()
