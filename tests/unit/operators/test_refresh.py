"""The refresh operator's Spark connection check and the exact spark-submit command it builds."""

from __future__ import annotations

import json

import airflow.sdk.exceptions
import pytest

from airflow_provider_streambed import Mirror, RefreshGroup
from airflow_provider_streambed.exceptions import ConnectionConfigError, DeclarationError
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.operators.refresh import RefreshGroupOperator, submit_master
from airflow_provider_streambed.refresh import job_application
from airflow_provider_streambed.staging import JobSpec

GROUP = RefreshGroup(name="bank", source_conn_id="bank_pg", catalog_conn_id="lake", namespace="bank",
                     members=[Mirror("accounts")])


@pytest.mark.skipif(not hasattr(airflow.sdk.exceptions, "AirflowNotFoundException"),
                    reason="Airflow 3.1 looks a missing connection up through a task's supervisor, "
                           "which a test outside a task lacks")
def test_a_missing_spark_connection_is_refused_naming_it() -> None:
    task = RefreshGroupOperator(task_id="r", group=GROUP, spark_conn_id="no_such_spark")
    with pytest.raises(ConnectionConfigError, match=r"group 'bank': Spark connection 'no_such_spark' is not defined"):
        task.check_spark_connection()


def test_a_defined_spark_connection_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_MY_SPARK", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    connection = RefreshGroupOperator(task_id="r", group=GROUP, spark_conn_id="my_spark").check_spark_connection()
    assert (connection.conn_id, connection.host) == ("my_spark", "local[2]")


@pytest.mark.parametrize(
    ("connection", "master"),
    [({"conn_type": "spark", "host": "spark://10.0.0.5", "port": 7077}, "spark://10.0.0.5:7077"),
     ({"conn_type": "spark", "host": "local[2]"}, "local[2]"),
     ({"conn_type": "spark", "host": "spark://a:7077,b:7077"}, "spark://a:7077,b:7077")],
)
def test_the_master_is_the_one_the_spark_provider_resolves(
    connection: dict[str, object], master: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_MY_SPARK", json.dumps(connection))
    task = RefreshGroupOperator(task_id="r", group=GROUP, spark_conn_id="my_spark")
    assert submit_master(task.submit_hook(SPEC, SPEC_URI, ())) == master


SPEC = JobSpec(group=GROUP.to_dict(), run_key="bank.run-1", watermark=Lsn.parse("0/16B3748"), prev_watermark=None,
               cut_number=3, staging_root="s3://lake/_streambed/bank/bank.run-1", capture_manifest="unused")
SPEC_URI = "s3://lake/_streambed/bank/bank.run-1/_job/spec.json"


@pytest.mark.parametrize(
    ("members", "name", "arguments"),
    [((), "streambed-bank-cut-3", [SPEC_URI]),
     (("accounts",), "streambed-bank-cut-3-accounts", [SPEC_URI, "--members", "accounts"])],
)
def test_the_spark_submit_command_carries_only_the_spec_uri_and_members(
    monkeypatch: pytest.MonkeyPatch, members: tuple[str, ...], name: str, arguments: list[str]
) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_MY_SPARK", json.dumps({
        "conn_type": "spark", "host": "spark://master", "port": 7077, "password": "not-for-spark",
        "extra": {"deploy-mode": "client", "spark-binary": "spark-submit"},
    }))
    task = RefreshGroupOperator(task_id="r", group=GROUP, spark_conn_id="my_spark",
                                conf={"spark.executor.memory": "2g"}, driver_memory="1g")
    hook = task.submit_hook(SPEC, SPEC_URI, members)
    # the spark provider's own tests check the built command through this same method
    command = hook._build_spark_submit_command(job_application())
    assert command == [
        "spark-submit", "--master", "spark://master:7077", "--conf", "spark.executor.memory=2g",
        "--driver-memory", "1g", "--name", name, "--deploy-mode", "client",
        job_application(), *arguments,
    ]
    assert "not-for-spark" not in " ".join(command)


def test_bad_compact_modes_and_unknown_members_are_refused_at_parse_time() -> None:
    with pytest.raises(DeclarationError, match=r"task 'r': compact='sometimes'; expected one of"):
        RefreshGroupOperator(task_id="r", group=GROUP, compact="sometimes")
    with pytest.raises(DeclarationError, match=r"task 'r': members \['ledger'\] are not in group"):
        RefreshGroupOperator(task_id="r", group=GROUP, members=["ledger"])


@pytest.mark.parametrize(
    ("connection", "in_environment"),
    [({"conn_type": "spark", "host": "spark://master", "port": 7077, "extra": {"deploy-mode": "client"}}, True),
     ({"conn_type": "spark", "host": "local[2]"}, True),
     ({"conn_type": "spark", "host": "yarn", "extra": {"deploy-mode": "client"}}, False),
     ({"conn_type": "spark", "host": "spark://master", "port": 7077, "extra": {"deploy-mode": "cluster"}}, False)],
)
def test_the_object_stores_credentials_reach_only_a_driver_that_runs_here_and_never_the_command(
    monkeypatch: pytest.MonkeyPatch, connection: dict[str, object], in_environment: bool
) -> None:
    from airflow_provider_streambed import storage

    storage.configure("s3://lake", {"s3.endpoint": "http://store:8333", "s3.region": "r1",
                                    "s3.access-key-id": "AKIA-TEST", "s3.secret-access-key": "shh-secret"})
    monkeypatch.setenv("AIRFLOW_CONN_MY_SPARK", json.dumps(connection))
    standalone_cluster = connection["host"] == "spark://master" and not in_environment
    task = RefreshGroupOperator(task_id="r", group=GROUP, spark_conn_id="my_spark",  # the hook refuses env_vars
                                env_vars=None if standalone_cluster else {"TZ": "UTC"})  # in standalone-cluster mode
    hook = task.submit_hook(SPEC, SPEC_URI, ())
    command = " ".join(hook._build_spark_submit_command(job_application()))
    assert "--store s3.endpoint=http://store:8333 --store s3.region=r1" in command
    assert "AKIA-TEST" not in command and "shh-secret" not in command
    environment = hook._env or {}
    assert ("shh-secret" in environment.values()) is in_environment
    assert environment.get("AWS_ACCESS_KEY_ID") == ("AKIA-TEST" if in_environment else None)
