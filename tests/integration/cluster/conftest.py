"""Fixtures of the production-shape tests: a Spark cluster on namespaced hosts and SeaweedFS on its bridge."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyarrow import fs

from airflow_provider_streambed.testing.hosts import subnet_leftovers
from airflow_provider_streambed.testing.seaweed import REGION, ThrowawaySeaweed
from airflow_provider_streambed.testing.spark_cluster import NamespacedSparkCluster

#: Files the tests write go here: SeaweedFS's table bucket takes Iceberg paths only.
SCRATCH_BUCKET = "scratch"


def storage_credentials() -> dict[str, str]:
    """The cluster side's storage credentials (an instance role's, here SeaweedFS's fixed test keys)."""
    return {"AWS_ACCESS_KEY_ID": ThrowawaySeaweed.access_key, "AWS_SECRET_ACCESS_KEY": ThrowawaySeaweed.secret_key,
            "AWS_REGION": REGION}


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NamespacedSparkCluster]:
    """A master and two workers on namespaced hosts for the module; nothing of them is left afterwards."""
    with NamespacedSparkCluster(tmp_path_factory.mktemp("spark-cluster"), storage_credentials()) as cluster:
        subnet = cluster.hosts.subnet
        yield cluster
    assert not subnet_leftovers(subnet), f"left behind by the cluster: {subnet_leftovers(subnet)}"


@pytest.fixture(scope="module")
def bridge_seaweed(spark_cluster: NamespacedSparkCluster) -> Iterator[ThrowawaySeaweed]:
    """SeaweedFS on the cluster's bridge address (where executors reach it), with the bucket ``scratch``."""
    with ThrowawaySeaweed(host=spark_cluster.address) as server:
        s3 = fs.S3FileSystem(endpoint_override=server.s3_endpoint, access_key=server.access_key,
                             secret_key=server.secret_key, region=REGION, scheme="http", allow_bucket_creation=True)
        s3.create_dir(SCRATCH_BUCKET)
        yield server
