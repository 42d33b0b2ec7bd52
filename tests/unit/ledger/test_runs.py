"""Runs of one group are serialised: a second unpublished run is refused or supersedes the first."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_provider_streambed.exceptions import GroupBusyError
from airflow_provider_streambed.ledger import Ledger, RunState
from airflow_provider_streambed.ledger.runs import claim_group, confirm_claim, pending_runs
from airflow_provider_streambed.lsn import Lsn


@pytest.fixture
def ledger(tmp_path: Path) -> Ledger:
    result = Ledger(f"sqlite:///{tmp_path / 'ledger.db'}")
    result.create()
    return result


def test_a_second_run_is_refused_while_the_first_is_unpublished(ledger: Ledger) -> None:
    claim_group(ledger, "bank", "run-1")
    ledger.pin_run("bank", "run-1", Lsn(100))
    claim_group(ledger, "bank", "run-1")  # the same run (a retry) may go on
    with pytest.raises(GroupBusyError, match=r"group 'bank': run 'run-1' pinned W=0/64 .* run 'run-2' cannot start"):
        claim_group(ledger, "bank", "run-2")
    claim_group(ledger, "other", "run-2")  # other groups are independent


def test_a_published_run_frees_the_group(ledger: Ledger) -> None:
    ledger.pin_run("bank", "run-1", Lsn(100))
    with ledger.begin() as connection:
        ledger.record_cut(connection, "bank", "run-1", Lsn(100), {})
    assert pending_runs(ledger, "bank") == []
    claim_group(ledger, "bank", "run-2")


def test_supersede_abandons_the_pending_run(ledger: Ledger) -> None:
    ledger.pin_run("bank", "run-1", Lsn(100))
    claim_group(ledger, "bank", "run-2", supersede=True)
    record = ledger.get_run("bank", "run-1")
    assert record is not None and record.state == RunState.SUPERSEDED
    assert pending_runs(ledger, "bank") == []


def test_of_two_runs_pinned_at_once_the_later_gives_way(ledger: Ledger) -> None:
    ledger.pin_run("bank", "run-a", Lsn(100))
    ledger.pin_run("bank", "run-b", Lsn(120))
    confirm_claim(ledger, "bank", "run-a")
    with pytest.raises(GroupBusyError, match="run 'run-a' pinned its W first"):
        confirm_claim(ledger, "bank", "run-b")
    record = ledger.get_run("bank", "run-b")
    assert record is not None and record.state == RunState.SUPERSEDED
