"""The refresh job through real spark-submit: one application per run, and retry after a failure."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from airflow_provider_streambed.exceptions import RefreshError
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.member_declarations import PythonMember
from airflow_provider_streambed.refresh import collect_member_manifests, run_local_spark_submit, write_job_spec
from airflow_provider_streambed.staging.members import read_member_manifest
from airflow_provider_streambed.testing.spark import EventLogs
from tests.integration.refresh.jobs import read_staged, sorted_rows, stage_spec
from tests.integration.refresh.python_members import FLAKY_FLAG
from tests.integration.refresh.test_members import MODULE, derived_group, region_models

pytestmark = pytest.mark.slow

GROUP = derived_group("five", PythonMember("flaky", f"{MODULE}:flaky_totals", sources=("accounts",)))


def test_one_application_per_run_and_retry_recomputes_only_the_failed_member(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(FLAKY_FLAG, str(tmp_path / "flaky.flag"))
    rng = random.Random(3)
    accounts, regions = region_models(rng, 49)
    accounts.commit()
    captures = [model.flush(tmp_path / "capture" / model.name, model.name) for model in (accounts, regions)]
    spec = stage_spec(tmp_path / "warehouse", GROUP, "run1", Lsn(accounts.lsn), captures)
    spec_uri = write_job_spec(spec)
    event_log = EventLogs(tmp_path / "events")
    conf = event_log.conf()

    with pytest.raises(RefreshError, match=r"member 'flaky': RuntimeError: flaky member fails on its first call"):
        run_local_spark_submit(spec_uri, conf=conf)
    assert event_log.applications() == 1
    assert read_member_manifest(spec.staging_root, "flaky") is None
    first = {
        name: read_member_manifest(spec.staging_root, name) for name in ("accounts", "regions", "by_name", "totals")
    }
    assert all(first.values()), first

    run_local_spark_submit(spec_uri, conf=conf)
    assert event_log.applications() == 2  # one application for the whole 5-member run
    staged = collect_member_manifests(spec)
    assert set(staged) == {"accounts", "regions", "by_name", "totals", "flaky"}
    for name, manifest in first.items():
        assert staged[name] == manifest, f"{name} was recomputed"
    assert sorted_rows(read_staged(staged["accounts"]), ("region", "id")) == accounts.truth()
    assert read_staged(staged["flaky"]).to_pylist() != []
    assert sorted_rows(read_staged(staged["flaky"]), ("region",)) == sorted_rows(
        read_staged(staged["totals"]), ("region",)
    )
