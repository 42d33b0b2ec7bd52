"""One rule, one error: a run whose W is not after the last cut's fails as final on every path.

Real PostgreSQL and a SQLite catalog; the steps run through :mod:`airflow_provider_streambed.steps`
(the composition every face calls) inside :func:`~airflow_provider_streambed.steps.settling` with
retries left, so only the error's class can release the group. The last cut moves past the run's
W the way a REST catalog's reconciliation records a cut the ledger lacked: a cut of another run.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path

import psycopg
import pytest

from airflow_provider_streambed import Mirror, RefreshGroup, steps
from airflow_provider_streambed.capture.run_records import CaptureResult
from airflow_provider_streambed.catalog import ledger_of, open_catalog
from airflow_provider_streambed.exceptions import InvalidWatermarkError, is_final
from airflow_provider_streambed.ledger import RunState
from airflow_provider_streambed.ledger.claims import claim_group
from airflow_provider_streambed.local import refresh_once
from airflow_provider_streambed.refresh.plan.spec import check_spec
from airflow_provider_streambed.staging import JobSpec

pytestmark = pytest.mark.slow

GROUP = RefreshGroup(name="rule", source_conn_id="src", catalog_conn_id="lake", namespace="rule",
                     members=[Mirror("public.t")])


@pytest.fixture
def run(pg_dsn: str, sqlite_catalog_uri: str, tmp_path: Path) -> Iterator[steps.Run]:
    """Run ``r2`` of the group, captured (cut 1 published before it), its W pinned."""
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
        conn.execute("INSERT INTO t SELECT g, 'a' FROM generate_series(1, 10) g")
    properties = {"uri": sqlite_catalog_uri, "warehouse": (tmp_path / "warehouse").as_uri()}
    refresh_once(GROUP, source_dsn=pg_dsn, catalog_properties=properties, run_key="r1")
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("UPDATE t SET v = 'b' WHERE id = 1")
    catalog = open_catalog(properties)
    second = steps.Run(GROUP, "r2", catalog, ledger_of(catalog))
    captured = steps.capture(second, source=lambda: psycopg.connect(pg_dsn))
    assert isinstance(captured, CaptureResult)
    yield second


def no_spark(spec: JobSpec, spec_uri: str, members: Sequence[str]) -> None:
    pytest.fail("a mirror's change merges in-process: no Spark application")


def record_foreign_cut(run: steps.Run) -> None:
    """Record cut 2 of another run, at a W past this run's (its members carried from cut 1)."""
    pinned = run.ledger.get_run(run.group.name, run.run_key)
    last = run.ledger.last_cut(run.group.name)
    assert pinned is not None and last is not None
    with run.ledger.begin() as connection:
        run.ledger.record_cut(connection, run.group.name, "elsewhere", pinned.watermark + 1, last.members)


def assert_failed_and_released(run: steps.Run, error: pytest.ExceptionInfo[InvalidWatermarkError]) -> None:
    assert is_final(error.value)
    record = run.ledger.get_run(run.group.name, run.run_key)
    assert record is not None and record.state == RunState.FAILED, "the run was not marked failed"
    claim_group(run.ledger, run.group.name, "r3")  # no GroupBusyError: the claim was released


def test_the_refresh_plan_refuses_it_as_final(run: steps.Run) -> None:
    record_foreign_cut(run)
    with pytest.raises(InvalidWatermarkError, match=r"run 'r2': W=\S+ is not after cut 2's W=") as error, \
            steps.settling(run, will_retry=True):
        steps.refresh(run, spark=lambda: no_spark)
    assert_failed_and_released(run, error)


def test_publish_refuses_it_as_final(run: steps.Run) -> None:
    refreshed = steps.refresh(run, spark=lambda: no_spark)
    assert isinstance(refreshed, steps.Refreshed)
    record_foreign_cut(run)
    with pytest.raises(InvalidWatermarkError, match=r"run 'r2': W=\S+ is not after cut 2's W=") as error, \
            steps.settling(run, will_retry=True):
        steps.publish(run, source=lambda: pytest.fail("nothing is published, the slot does not move"))
    assert_failed_and_released(run, error)


def test_the_spark_job_refuses_it_as_final(run: steps.Run) -> None:
    refreshed = steps.refresh(run, spark=lambda: no_spark)
    assert isinstance(refreshed, steps.Refreshed)
    behind = replace(refreshed.spec, prev_watermark=refreshed.spec.watermark)  # a spec planned on a later cut
    with pytest.raises(InvalidWatermarkError, match=r"run 'r2': W=\S+ is not after the last cut's W=") as error, \
            steps.settling(run, will_retry=True):
        check_spec(behind, GROUP)  # the job's own check, before it computes anything
    assert_failed_and_released(run, error)
