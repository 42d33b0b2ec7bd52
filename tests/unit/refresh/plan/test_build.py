"""Planning the refresh job: spec round trip, ordering, spec checks, collecting staged members."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.exceptions import InvalidWatermarkError, RefreshError
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.member_declarations import Mirror, PythonMember, SqlMember
from airflow_provider_streambed.refresh import collect_member_manifests
from airflow_provider_streambed.refresh.plan.spec import check_spec
from airflow_provider_streambed.refresh.plan.work import definition_digest, fit_manifest, members_to_compute
from airflow_provider_streambed.staging import JobSpec, MemberManifest, SnapshotFiles, member_manifest_uri, write_json
from airflow_provider_streambed.staging.member_manifest import CARRIED

GROUP = RefreshGroup(
    "shop",
    "src",
    "cat",
    "ns",
    (
        SqlMember("report", "SELECT * FROM totals", sources=("totals",)),
        PythonMember("totals", "pkg.mod:fn", sources=("orders",)),
        Mirror("public.orders"),
    ),
)


def _spec(tmp_path: Path, **changes: object) -> JobSpec:
    fields: dict[str, object] = {
        "group": GROUP.to_dict(),
        "run_key": "run1",
        "watermark": Lsn.parse("0/2000"),
        "prev_watermark": Lsn.parse("0/1000"),
        "cut_number": 2,
        "staging_root": (tmp_path / "stage").as_uri(),
        "capture_manifest": (tmp_path / "capture.json").as_uri(),
        "previous_files": {"orders": ("file:///w/a.parquet",)},
        "previous_key_columns": {"orders": ("id",)},
    }
    fields.update(changes)
    return JobSpec(**fields)  # type: ignore[arg-type]


def test_spec_round_trips_through_json(tmp_path: Path) -> None:
    spec = _spec(tmp_path, members=("orders",), previous_deletes={"orders": ("file:///w/d.parquet",)},
                 rewrite={"orders": "compaction: 64 files"})
    assert JobSpec.from_dict(spec.to_dict()) == spec
    assert spec.previous_snapshot("orders") == SnapshotFiles(("file:///w/a.parquet",), ("file:///w/d.parquet",))
    assert spec.previous_snapshot("totals") == SnapshotFiles()
    first = _spec(tmp_path, prev_watermark=None, cut_number=1, previous_files={}, previous_key_columns={})
    assert JobSpec.from_dict(first.to_dict()) == first
    assert RefreshGroup.from_dict(spec.group) == GROUP


def test_members_run_in_dependency_order() -> None:
    assert [member.name for member in GROUP.topological_members()] == ["orders", "totals", "report"]


def test_check_spec_refuses_w_not_after_previous_and_unknown_members(tmp_path: Path) -> None:
    check_spec(_spec(tmp_path), GROUP)
    with pytest.raises(InvalidWatermarkError, match=r"group 'shop', run 'run1': W=0/1000 is not after the last cut's"):
        check_spec(_spec(tmp_path, watermark=Lsn.parse("0/1000")), GROUP)
    with pytest.raises(RefreshError, match=r"group 'shop', run 'run1': unknown members \['nope'\]"):
        check_spec(_spec(tmp_path, members=("nope",)), GROUP)


def test_collect_member_manifests_names_missing_members(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    staged = MemberManifest("orders", spec.watermark, ("file:///x.parquet",), 3, ("id",), "2024-01-01T00:00:00")
    write_json(member_manifest_uri(spec.staging_root, "orders"), staged.to_dict())
    stale = MemberManifest("totals", Lsn.parse("0/1"), (), 0)
    write_json(member_manifest_uri(spec.staging_root, "totals"), stale.to_dict())
    with pytest.raises(RefreshError, match=r"group 'shop', run 'run1', W=0/2000: members \['report', 'totals'\]"):
        collect_member_manifests(spec)
    assert collect_member_manifests(_spec(tmp_path, members=("orders",))) == {"orders": staged}


def test_a_member_is_computed_again_when_a_source_it_was_computed_from_is(tmp_path: Path) -> None:
    spec = _spec(tmp_path)

    def stage(name: str, written_at: str, **inputs: str) -> None:
        manifest = MemberManifest(name, spec.watermark, (), 0, written_at=written_at,
                                  definition=definition_digest(GROUP.member(name)), inputs=inputs)
        assert MemberManifest.from_dict(manifest.to_dict()) == manifest
        write_json(member_manifest_uri(spec.staging_root, name), manifest.to_dict())

    stage("orders", "t1")
    stage("totals", "t2", orders="t1")
    assert fit_manifest(spec, GROUP, GROUP.member("totals")) is not None
    stage("report", "t3", totals="t2")
    assert members_to_compute(spec) == ()
    stage("orders", "t4")  # computed again between tries (its declaration edited)
    assert members_to_compute(spec) == ("report", "totals")  # and so is everything computed from it
    assert fit_manifest(spec, GROUP, GROUP.member("orders")) is not None
    stage("totals", "t5", orders="t4")
    assert members_to_compute(spec) == ("report",)
    carried = _spec(tmp_path, carried={"orders": "no changes"})  # a source carried now, staged when computed
    assert members_to_compute(carried) == ("report", "totals")
    stage("totals", "t6", orders=CARRIED)
    assert members_to_compute(carried) == ("report",)


def test_publish_refuses_a_member_computed_from_a_source_output_staged_again_since(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    for name, written_at, inputs in (("orders", "t4", {}), ("totals", "t2", {"orders": "t1"}),
                                     ("report", "t3", {"totals": "t2"})):
        write_json(member_manifest_uri(spec.staging_root, name),
                   MemberManifest(name, spec.watermark, (), 0, written_at=written_at, inputs=inputs).to_dict())
    with pytest.raises(RefreshError, match=r"members \['totals'\] were computed from source outputs staged again"):
        collect_member_manifests(spec)
    assert set(collect_member_manifests(_spec(tmp_path, members=("totals", "report")))) == {"totals", "report"}
