"""StreambedRefreshGroup builds the three tasks in classic and decorated DAGs."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pendulum
import pytest
from airflow.sdk import DAG, Param, dag

from airflow_provider_streambed import Mirror, RefreshGroup, SqlMember, StreambedRefreshGroup
from airflow_provider_streambed.exceptions import DeclarationError

GROUP = RefreshGroup(
    name="bank",
    source_conn_id="bank_pg",
    catalog_conn_id="lakehouse",
    namespace="bank",
    members=[Mirror("accounts"), SqlMember("rich", "SELECT * FROM accounts WHERE balance > 100", ["accounts"])],
)
START = pendulum.datetime(2026, 1, 1, tz="UTC")


def _edges(the_dag: DAG) -> dict[str, set[str]]:
    return {task.task_id: set(task.upstream_task_ids) for task in the_dag.tasks}


def test_classic_dag_gets_three_chained_tasks_and_the_params() -> None:
    with DAG("classic", schedule=None, start_date=START) as the_dag:
        StreambedRefreshGroup(GROUP, spark_conn_id="spark_local")
    assert _edges(the_dag) == {
        "bank.capture_watermark": set(),
        "bank.refresh_group": {"bank.capture_watermark"},
        "bank.publish_cut": {"bank.refresh_group"},
    }
    assert the_dag.get_task("bank.publish_cut").trigger_rule == "all_success"
    assert the_dag.get_task("bank.refresh_group").spark_conn_id == "spark_local"
    assert "watermark_lsn" in the_dag.params
    assert the_dag.params["watermark_lsn"] is None
    assert the_dag.params["supersede_pending_runs"] is False
    assert the_dag.params["resync"] is False


def test_decorated_dag_and_custom_group_id() -> None:
    @dag(schedule=None, start_date=START)
    def decorated() -> None:
        StreambedRefreshGroup(GROUP, group_id="bank_cuts")

    the_dag = decorated()
    assert sorted(_edges(the_dag)) == [
        "bank_cuts.capture_watermark", "bank_cuts.publish_cut", "bank_cuts.refresh_group"
    ]
    assert the_dag.task_group.children["bank_cuts"].tooltip.startswith("streambed group 'bank'")


def test_an_existing_watermark_param_is_kept() -> None:
    with DAG("own_param", schedule=None, start_date=START, params={"watermark_lsn": Param("0/10", type="string")}) as d:
        StreambedRefreshGroup(GROUP)
    assert d.params["watermark_lsn"] == "0/10"


def test_publish_emits_through_an_alias_and_reads_member_assets() -> None:
    with DAG("assets", schedule=None, start_date=START) as the_dag:
        StreambedRefreshGroup(GROUP)
    publish = the_dag.get_task("bank.publish_cut")
    assert [alias.name for alias in publish.outlets] == ["streambed-bank-cuts"]
    assert [asset.uri for asset in publish.inlets] == ["streambed://lakehouse/bank/accounts",
                                                      "streambed://lakehouse/bank/rich"]


def test_not_a_declaration_is_refused() -> None:
    with DAG("bad", schedule=None, start_date=START), pytest.raises(DeclarationError, match="needs a RefreshGroup"):
        StreambedRefreshGroup({"name": "bank"})  # type: ignore[arg-type]  (the mistake under test)


def test_package_root_exports_the_group_lazily() -> None:
    code = (
        "import sys, airflow_provider_streambed as p;"
        "assert not any(m.startswith('airflow.') for m in sys.modules);"
        "assert p.StreambedRefreshGroup.__name__ == 'StreambedRefreshGroup'"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_bad_declaration_in_a_dag_file_is_an_import_error_naming_group_and_member(tmp_path: Path) -> None:
    from airflow_provider_streambed.compat.airflow import dag_bag

    (tmp_path / "broken.py").write_text(textwrap.dedent("""
        import pendulum
        from airflow.sdk import DAG
        from airflow_provider_streambed import Mirror, RefreshGroup, SqlMember, StreambedRefreshGroup

        group = RefreshGroup(name="payments", source_conn_id="src", catalog_conn_id="lake", namespace="pay",
                             members=[Mirror("ledger"), SqlMember("totals", "SELECT 1", sources=["ledgr"])])
        with DAG("broken", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")):
            StreambedRefreshGroup(group)
    """))
    bag = dag_bag(str(tmp_path))
    assert not bag.dags
    [error] = bag.import_errors.values()
    assert "group 'payments', member 'totals': unknown source 'ledgr'" in error


def test_example_dags_import_without_errors() -> None:
    from airflow_provider_streambed.compat.airflow import dag_bag

    bag = dag_bag(str(Path(__file__).resolve().parents[2] / "dags"))
    assert bag.import_errors == {}
    assert {"streambed_bank", "streambed_bank_senders", "streambed_bank_events", "streambed_bank_events_connect"} \
        <= set(bag.dags)


def test_parsing_a_dag_imports_no_spark_and_no_duckdb() -> None:
    """The operators import the engine's steps when a task runs: a DAG file's parse stays light."""
    code = (
        "import sys, airflow_provider_streambed.task_group;"
        "loaded = [m for m in ('pyspark', 'duckdb', 'airflow_provider_streambed.steps') if m in sys.modules];"
        "sys.exit(f'imported at parse time: {loaded}' if loaded else 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
