"""The throwaway SeaweedFS server: an Iceberg REST catalog on S3 whose tables survive a crash."""

from __future__ import annotations

import os
import socket

import pyarrow as pa
import pytest
import requests
from pyiceberg.catalog import load_catalog

from airflow_provider_streambed.testing import seaweed as seaweed_module
from airflow_provider_streambed.testing.seaweed import ThrowawaySeaweed

pytestmark = pytest.mark.slow

ROWS = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": pa.array(["a", "b", "c"], pa.string())})


def read_rows(properties: dict[str, str]) -> list[dict[str, object]]:
    """The rows of ``shop.orders`` through a new catalog client, by id."""
    table = load_catalog("rest", **properties).load_table("shop.orders")
    return sorted(table.scan().to_arrow().to_pylist(), key=lambda row: int(str(row["id"])))


@pytest.mark.parametrize("rest_server", ["seaweed"])
def test_tables_survive_a_crash(seaweed: ThrowawaySeaweed, rest_properties: dict[str, str]) -> None:
    catalog = load_catalog("rest", **rest_properties)
    catalog.create_namespace("shop")
    table = catalog.create_table("shop.orders", schema=ROWS.schema)
    table.append(ROWS)
    assert table.metadata_location.startswith("s3://warehouse/shop/orders/metadata/")
    assert read_rows(rest_properties) == ROWS.to_pylist()

    first = seaweed.pid
    assert os.getpgid(first) == first  # the benchmarks read the server's CPU time off this process
    seaweed.kill()
    with pytest.raises(requests.exceptions.ConnectionError):
        catalog.list_namespaces()
    with pytest.raises(RuntimeError, match="not running"):
        assert seaweed.pid

    seaweed.restart()
    assert seaweed.pid != first
    assert load_catalog("rest", **rest_properties).list_namespaces() == [("shop",)]
    assert read_rows(rest_properties) == ROWS.to_pylist()

    seaweed.stop()
    assert not seaweed.root.exists()
    with pytest.raises(requests.exceptions.ConnectionError):
        requests.get(f"{seaweed.catalog_uri}/v1/config", timeout=5)


def test_a_chosen_port_taken_before_the_server_binds_it_is_chosen_again(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:  # another process's listener
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        held = holder.getsockname()[1]
        chosen = seaweed_module.free_port_with_grpc
        handed: list[int] = []

        def first_taken(taken: set[int]) -> int:
            handed.append(held if not handed else chosen(taken))
            return handed[-1]

        monkeypatch.setattr(seaweed_module, "free_port_with_grpc", first_taken)
        with ThrowawaySeaweed() as server:
            assert server.s3_port != held  # s3 is the first component given a port
            assert seaweed_module.PORT_TAKEN in server.server_log()
            requests.get(f"{server.catalog_uri}/v1/config", timeout=5).raise_for_status()
    assert handed[0] == held


def test_a_port_set_by_the_caller_and_taken_fails_the_start() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        server = ThrowawaySeaweed(volume_port=holder.getsockname()[1])
        with pytest.raises(RuntimeError, match="Port allocation failed"):
            server.start()
        server.stop()
