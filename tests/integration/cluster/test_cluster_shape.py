"""The production shape's fixture: namespaced hosts, executors that see only object storage, a lost worker."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_provider_streambed.testing.hosts import NetworkHosts, check_namespaces_usable, subnet_leftovers
from airflow_provider_streambed.testing.seaweed import ThrowawaySeaweed
from airflow_provider_streambed.testing.spark_cluster import NamespacedSparkCluster, object_store_conf
from tests.integration.cluster.conftest import SCRATCH_BUCKET, storage_credentials

pytestmark = [pytest.mark.slow, pytest.mark.cluster]

JOB = Path(__file__).with_name("shape_job.py")
#: Tried from inside a namespace: prints ``connected`` or the error's class name.
CONNECT = """
import socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3).close()
    print("connected")
except OSError as error:
    print(type(error).__name__)
"""


def test_namespaces_are_usable_here() -> None:
    check_namespaces_usable()  # raises HostsUnavailableError saying why: CI runs as root, a skip would hide it


@pytest.fixture
def listeners() -> Iterator[dict[str, socket.socket]]:
    """Two listeners in the root namespace, filled in by the test: on the bridge and on 127.0.0.1."""
    sockets: dict[str, socket.socket] = {}
    yield sockets
    for sock in sockets.values():
        sock.close()


def connect_from(hosts: NetworkHosts, index: int, address: str, port: int) -> str:
    command = [*hosts.prefix(index), sys.executable, "-c", CONNECT, address, str(port)]
    return subprocess.run(command, capture_output=True, text=True, check=True, timeout=30).stdout.strip()


def test_a_host_reaches_the_bridge_address_but_not_the_root_loopback(listeners: dict[str, socket.socket]) -> None:
    with NetworkHosts(2) as hosts:
        listeners["bridge"] = socket.create_server((hosts.address, 0))
        listeners["loopback"] = socket.create_server(("127.0.0.1", 0))
        bridge_port = listeners["bridge"].getsockname()[1]
        loopback_port = listeners["loopback"].getsockname()[1]

        assert connect_from(hosts, 0, hosts.address, bridge_port) == "connected"
        assert connect_from(hosts, 0, "127.0.0.1", loopback_port) == "ConnectionRefusedError"  # its own lo
        assert connect_from(hosts, 0, hosts.address, loopback_port) == "ConnectionRefusedError"  # bound to root's lo
        routes = subprocess.run([*hosts.prefix(0), "ip", "-4", "route"], capture_output=True, text=True, check=True)
        assert "default" not in routes.stdout  # nothing beyond the subnet: no traffic leaves the machine
        assert hosts.hosts[1].address in subprocess.run(
            [*hosts.prefix(1), "ip", "-4", "-o", "addr"], capture_output=True, text=True, check=True).stdout
        subnet = hosts.subnet
        assert subnet_leftovers(subnet)
    assert not subnet_leftovers(subnet)


def driver_command(cluster: NamespacedSparkCluster, seaweed: ThrowawaySeaweed, *arguments: str) -> list[str]:
    """spark-submit of the shape job in client mode: the driver here, binding the bridge address."""
    conf = {**cluster.driver_conf(), **object_store_conf(seaweed.catalog_properties()), "spark.ui.enabled": "false"}
    command = [str(Path(sys.executable).with_name("spark-submit")), "--master", cluster.master]
    for key, value in conf.items():
        command += ["--conf", f"{key}={value}"]
    return [*command, str(JOB), *arguments]


def driver_environment() -> dict[str, str]:
    """The driver's environment: this process's and the storage credentials (never on the command line)."""
    return {**os.environ, **storage_credentials()}


def result_of(output: str) -> dict[str, object]:
    lines = [line for line in output.splitlines() if line.startswith("RESULT ")]
    assert lines, f"the job printed no result:\n{output[-3000:]}"
    result: dict[str, object] = json.loads(lines[-1].removeprefix("RESULT "))
    return result


def test_executors_on_both_workers_use_s3_and_see_nothing_local(
    spark_cluster: NamespacedSparkCluster, bridge_seaweed: ThrowawaySeaweed, tmp_path: Path
) -> None:
    local_file = tmp_path / "staged.txt"
    local_file.write_text("only on the Airflow side")
    command = driver_command(spark_cluster, bridge_seaweed, "storage", spark_cluster.address, SCRATCH_BUCKET,
                             tmp_path.name, str(local_file))
    assert not any(key in " ".join(command) for key in (bridge_seaweed.secret_key, bridge_seaweed.access_key))
    run = subprocess.run(command, env=driver_environment(), capture_output=True, text=True, timeout=300,
                         check=False)
    assert run.returncode == 0, run.stderr[-5000:]
    result = result_of(run.stdout)

    workers = sorted(spark_cluster.worker_address(index) for index in range(spark_cluster.workers))
    assert result["writers"] == workers  # each executor wrote Parquet to s3:// through S3A
    assert result["readers"] == workers  # and each read some back
    assert result["rows_read"] == 2000
    assert result["files"] == 4
    assert "FileNotFoundError" in str(result["opened"]) and str(local_file) in str(result["opened"])
    assert result["driver_reads_local_file"] == "only on the Airflow side"
    tmp_listings = result["executor_tmp"]
    assert isinstance(tmp_listings, dict) and sorted(tmp_listings) == workers
    assert all(not any(name.startswith("pytest-") for name in listing) for listing in tmp_listings.values())
    print("phases (s):", result["seconds"])


def test_a_worker_killed_mid_stage_leaves_the_job_to_the_other(
    spark_cluster: NamespacedSparkCluster, bridge_seaweed: ThrowawaySeaweed, tmp_path: Path
) -> None:
    tasks, seconds = 6, 3
    command = driver_command(spark_cluster, bridge_seaweed, "slow", spark_cluster.address, str(tasks), str(seconds))
    with (tmp_path / "driver.log").open("w") as log:
        driver = subprocess.Popen(command, env=driver_environment(), stdout=subprocess.PIPE, stderr=log, text=True)
        assert driver.stdout is not None
        lines = iter(driver.stdout.readline, "")
        assert any(line.strip() == "RUNNING" for line in lines), (tmp_path / "driver.log").read_text()[-5000:]
        time.sleep(1)  # both executors are inside a sleeping task
        spark_cluster.kill_worker(0)
        killed = time.monotonic()
        output = "".join(lines)
        assert driver.wait(timeout=120) == 0, (tmp_path / "driver.log").read_text()[-5000:]
    finished_after_kill = time.monotonic() - killed
    assert not spark_cluster.hosts.pids(1)  # the whole host died: worker JVM, executor, Python workers
    result = result_of(output)

    assert result["sum"] == sum(value * value for value in range(tasks))  # Spark rescheduled the lost tasks
    addresses = result["addresses"]
    assert isinstance(addresses, list)
    assert spark_cluster.worker_address(1) in addresses
    lost = [line for line in (tmp_path / "driver.log").read_text().splitlines()
            if "Lost executor" in line and spark_cluster.worker_address(0) in line]
    assert lost, "the driver never noticed the lost executor"  # 'worker lost: <address>:7078 got disassociated'
    print(f"job {result['seconds']} s, finished {finished_after_kill:.1f} s after the kill; tasks by address:",
          {address: addresses.count(address) for address in sorted(set(addresses))})

    spark_cluster.restart_worker(0)  # a replacement host registers with the master again
    assert spark_cluster.log("worker-0").count("Successfully registered with master") == 2
