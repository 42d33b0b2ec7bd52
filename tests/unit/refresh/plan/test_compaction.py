"""Which merge-on-read mirrors a run rewrites whole (pure planning)."""

from __future__ import annotations

import pytest

from airflow_provider_streambed import Mirror, RefreshGroup, SqlMember
from airflow_provider_streambed.exceptions import DeclarationError
from airflow_provider_streambed.refresh.plan.compaction import SnapshotStorage, choose_compactions, due_reason

GROUP = RefreshGroup(
    name="bank", source_conn_id="pg", catalog_conn_id="lake", namespace="bank",
    members=[
        Mirror("public.accounts"),
        Mirror("public.transfers", compact_max_files=10),
        Mirror("public.events", compact_deleted_ratio=0.5),
        SqlMember("balances", "SELECT 1", sources=["accounts"]),
    ],
)
MIRRORS = ("accounts", "transfers", "events")
MIB = 1024 * 1024


def test_storage_from_a_snapshot_summary_and_its_file_sizes() -> None:
    summary = {"total-records": "110", "total-position-deletes": "10", "total-data-files": "5",
               "total-delete-files": "2", "operation": "overwrite"}
    storage = SnapshotStorage.of(summary, [128 * MIB, 130 * MIB, 40 * MIB, 32 * MIB - 1, 1000, 2000, 3000])
    assert storage == SnapshotStorage(records=110, deleted=10, small_files=4)  # whole-write files are not small
    assert storage.deleted_ratio == pytest.approx(0.1)
    assert SnapshotStorage.of({}, []).deleted_ratio == 0.0
    assert SnapshotStorage(records=3, deleted=3, small_files=2).deleted_ratio == 1.0  # nothing live, all deleted


def test_due_at_the_thresholds_and_not_before() -> None:
    accounts = GROUP.member("accounts")
    assert isinstance(accounts, Mirror)
    assert due_reason(accounts, SnapshotStorage(110, 10, 2)) is None  # exactly 10 %: not past it
    assert due_reason(accounts, SnapshotStorage(111, 11, 2)) == (
        "compaction: 11 deleted rows are 11.0% of the live rows (threshold 10.0%)"
    )
    assert due_reason(accounts, SnapshotStorage(100, 0, 64)) is None
    assert due_reason(accounts, SnapshotStorage(100, 0, 65)) == "compaction: 65 small files (threshold 64)"


def test_auto_compacts_the_most_amplified_due_mirror_only() -> None:
    storage = {
        "accounts": SnapshotStorage(150, 50, 3),  # 50 % deleted: 5x its threshold
        "transfers": SnapshotStorage(100, 0, 30),  # 30 files: 3x its threshold
        "events": SnapshotStorage(140, 40, 3),  # 40 %: below its own 50 %
        "balances": SnapshotStorage(100, 90, 99),  # derived members are always whole
    }
    chosen = choose_compactions(GROUP, storage, [*MIRRORS, "balances"])
    assert list(chosen) == ["accounts"]
    assert chosen["accounts"].startswith("compaction: 50 deleted rows are 50.0%")
    assert list(choose_compactions(GROUP, storage, [*MIRRORS, "balances"], "all")) == ["accounts", "transfers"]
    assert choose_compactions(GROUP, storage, MIRRORS, "none") == {}


def test_only_computed_mirrors_with_a_previous_snapshot_are_compacted() -> None:
    storage = {"accounts": SnapshotStorage(150, 50, 3), "transfers": SnapshotStorage(100, 0, 30)}
    assert list(choose_compactions(GROUP, storage, ["transfers", "events"])) == ["transfers"]  # accounts carried
    assert choose_compactions(GROUP, {}, MIRRORS, "all") == {}  # first cut: nothing to compact


def test_an_unknown_mode_is_refused() -> None:
    with pytest.raises(DeclarationError, match=r"group 'bank': compact='some'; expected one of \['auto', 'all'"):
        choose_compactions(GROUP, {}, MIRRORS, "some")
