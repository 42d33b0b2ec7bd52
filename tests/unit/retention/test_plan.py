"""Which cuts expire: the newest ``keep_last`` and the young ones stay, pins always stay."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from airflow_provider_streambed import CutRetention, RefreshGroup, SqlMember
from airflow_provider_streambed.exceptions import DeclarationError
from airflow_provider_streambed.ledger import CutHead
from airflow_provider_streambed.retention.plan import MAX_CUTS_PER_COMMIT, due_cuts

NOW = dt.datetime(2026, 11, 25, 12, tzinfo=dt.UTC)


def heads(count: int, minutes_apart: int = 10, pinned: tuple[int, ...] = ()) -> list[CutHead]:
    """Cuts 1..count, the newest published just now."""
    return [CutHead(k, NOW - dt.timedelta(minutes=minutes_apart * (count - k)), k in pinned)
            for k in range(1, count + 1)]


def test_the_newest_keep_last_stay() -> None:
    retention = CutRetention(keep_last=3, keep_newer_than=dt.timedelta(0))
    assert due_cuts(heads(5), retention, NOW) == (1, 2)
    assert due_cuts(heads(3), retention, NOW) == ()
    assert due_cuts(heads(5), retention, NOW, adding=1) == (1, 2, 3)  # the cut being published counts


def test_young_cuts_stay_however_many() -> None:
    retention = CutRetention(keep_last=2, keep_newer_than=dt.timedelta(minutes=25))
    assert due_cuts(heads(6), retention, NOW) == (1, 2, 3)  # 50, 40, 30 minutes old; 20 and younger stay


def test_pinned_cuts_never_expire() -> None:
    retention = CutRetention(keep_last=1, keep_newer_than=dt.timedelta(0))
    assert due_cuts(heads(5, pinned=(2, 4)), retention, NOW) == (1, 3)


def test_a_backlog_expires_in_bounded_steps() -> None:
    retention = CutRetention(keep_last=1, keep_newer_than=dt.timedelta(0))
    due = due_cuts(heads(MAX_CUTS_PER_COMMIT + 50), retention, NOW)
    assert due == tuple(range(1, MAX_CUTS_PER_COMMIT + 1))


@pytest.mark.parametrize(("changes", "message"), [
    ({"keep_last": 0}, "keep_last must be an integer >= 1, got 0"),
    ({"keep_last": True}, "keep_last must be an integer >= 1, got True"),
    ({"keep_last": 2.5}, "keep_last must be an integer >= 1, got 2.5"),
    ({"keep_newer_than": dt.timedelta(hours=-1)}, "keep_newer_than must be a timedelta >= 0"),
    ({"delete_files_after": 3600}, "delete_files_after must be a timedelta >= 0, got 3600"),
])
def test_bad_retentions_say_which_field(changes: dict[str, object], message: str) -> None:
    with pytest.raises(DeclarationError, match=message):
        CutRetention(**{"keep_last": 3, **changes})  # type: ignore[arg-type]  # wrong on purpose


def test_a_group_carries_its_retention_through_job_specs() -> None:
    group = RefreshGroup("bank", "src", "cat", "ns", (SqlMember("a", "select 1"),),
                         retention=CutRetention(10, dt.timedelta(days=2), dt.timedelta(minutes=30)))
    assert RefreshGroup.from_dict(group.to_dict()) == group
    older = {key: value for key, value in group.to_dict().items() if key != "retention"}  # a spec of an older release
    assert RefreshGroup.from_dict(older).retention is None
    with pytest.raises(DeclarationError, match="retention expires cuts in one atomic commit and needs"):
        dataclasses.replace(group, atomicity="per_table")
    with pytest.raises(DeclarationError, match="retention must be a CutRetention, got 10"):
        dataclasses.replace(group, retention=10)  # type: ignore[arg-type]  # wrong on purpose
