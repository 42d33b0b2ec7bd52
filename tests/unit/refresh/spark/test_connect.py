"""The Spark Connect path without Spark: what is said about a server, how a local one starts and stops."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from airflow_provider_streambed.dependencies import check_spark_reachable, describe_remote
from airflow_provider_streambed.exceptions import RefreshError, SparkUnavailableError
from airflow_provider_streambed.refresh.spark.connect_server import SERVER_CLASS, ConnectServer
from airflow_provider_streambed.testing.postgres import free_port


def test_the_server_is_named_without_its_token() -> None:
    url = "sc://spark.example.com:15002/;user_id=airflow;token=s3cret;use_ssl=True"
    assert describe_remote(url) == "sc://spark.example.com:15002"


def test_an_unreachable_server_fails_fast_naming_it() -> None:
    url = f"sc://localhost:{free_port()}"
    with pytest.raises(RefreshError, match=rf"the Spark Connect server {url} \(connection 'sc'\) cannot be reached"):
        check_spark_reachable(url, "sc")


def test_an_unreachable_standalone_master_fails_fast_naming_every_host() -> None:
    master = f"spark://127.0.0.1:{free_port()},localhost:{free_port()}"
    with pytest.raises(SparkUnavailableError, match=f"the Spark master {master} cannot be reached: .*refused"):
        check_spark_reachable(master)
    check_spark_reachable("local[2]")  # not checked: nothing to connect to
    check_spark_reachable("yarn")


def test_a_local_server_runs_the_connect_class_on_its_port(tmp_path: Path) -> None:
    server = ConnectServer(port=15123, state_dir=tmp_path, conf={"spark.driver.memory": "2g"})
    command = server.command()
    assert command[1:5] == ["--class", SERVER_CLASS, "--master", "local[2]"]
    assert "spark.connect.grpc.binding.port=15123" in command and "spark.driver.memory=2g" in command
    assert command[-1] == "spark-internal"
    assert (server.url, server.running_pid(), server.stop()) == ("sc://localhost:15123", None, False)


def test_stop_reaps_a_server_this_process_started(tmp_path: Path) -> None:
    # a child in a session of its own, its handle dropped, as ConnectServer.start leaves the server's spark-submit
    pid = os.posix_spawnp("sleep", ["sleep", "600"], os.environ, setsid=True)
    server = ConnectServer(port=free_port(), state_dir=tmp_path)
    server.pid_file.write_text(str(pid))
    assert server.running_pid() == pid
    assert server.stop()
    with pytest.raises(ProcessLookupError):  # gone, not a zombie (a zombie takes signal 0)
        os.kill(pid, 0)
    with pytest.raises(ChildProcessError):  # and its exit status collected
        os.waitpid(pid, os.WNOHANG)
    assert (server.running_pid(), server.pid_file.exists()) == (None, False)
