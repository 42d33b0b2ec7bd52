"""Runs of one group are serialised: a second unpublished run is refused or supersedes the first."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_provider_streambed.exceptions import (
    ConnectionConfigError,
    GroupBusyError,
    LedgerError,
    PublishConflictError,
    RunSupersededError,
    SourceError,
)
from airflow_provider_streambed.ledger import Ledger, RunState
from airflow_provider_streambed.ledger.claims import (
    admit_run,
    claim_group,
    confirm_claim,
    pending_runs,
    settle_failure,
    supersede_run,
)
from airflow_provider_streambed.ledger.runs import DagRunRef, RunRecord, UnchangedRun
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
    with pytest.raises(RunSupersededError, match="run 'run-a' pinned its W first"):
        confirm_claim(ledger, "bank", "run-b")
    record = ledger.get_run("bank", "run-b")
    assert record is not None and record.state == RunState.SUPERSEDED and record.replaced_by == "run-a"


def test_the_busy_message_names_the_run_its_age_dag_run_and_the_ways_out(ledger: Ledger) -> None:
    ledger.pin_run("bank", "run-1", Lsn(100), DagRunRef("bank_dag", "scheduled__2026-01-01"))
    ledger.record_failure("bank", "run-1", SourceError("source down"), release=False)
    with pytest.raises(GroupBusyError) as raised:
        claim_group(ledger, "bank", "run-2")
    message = str(raised.value)
    for part in ("run 'run-1' (DAG 'bank_dag' run 'scheduled__2026-01-01')", "W=0/64", "0 min ago",
                 "last failure SourceError", "clear (retry) that run", "supersede_pending_runs",
                 "streambed runs supersede --group bank run-1"):
        assert part in message


def test_a_final_error_releases_the_claim_and_the_next_run_takes_over(ledger: Ledger) -> None:
    ledger.pin_run("bank", "run-1", Lsn(100))
    assert settle_failure(ledger, "bank", "run-1", RunSupersededError("gone"), will_retry=True)
    failed = ledger.get_run("bank", "run-1")
    assert failed is not None and failed.state == RunState.FAILED and failed.last_error == "RunSupersededError"
    assert admit_run(ledger, "bank", "run-2") is None  # free: the new run may pin
    ledger.pin_run("bank", "run-2", Lsn(200))
    assert confirm_claim(ledger, "bank", "run-2") == ["run-1"]
    with pytest.raises(RunSupersededError, match=r"run 'run-1' .* failed and was replaced by run run-2"):
        admit_run(ledger, "bank", "run-1")  # clearing the failed run later


def test_a_retryable_error_keeps_the_claim_until_the_last_try(ledger: Ledger) -> None:
    ledger.pin_run("bank", "run-1", Lsn(100))
    assert not settle_failure(ledger, "bank", "run-1", SourceError("down"), will_retry=True)
    with pytest.raises(GroupBusyError, match="last failure SourceError"):
        admit_run(ledger, "bank", "run-2")
    assert settle_failure(ledger, "bank", "run-1", OSError("still down"), will_retry=False)
    assert admit_run(ledger, "bank", "run-2") is None


def test_a_wrong_setting_frees_the_group_at_once_and_the_run_resumes_when_cleared(ledger: Ledger) -> None:
    ledger.pin_run("bank", "run-1", Lsn(100))
    error = ConnectionConfigError("group 'bank': Spark connection 'spark_missing' is not defined")
    assert settle_failure(ledger, "bank", "run-1", error, will_retry=True)  # a retry would read the same setting
    failed = ledger.get_run("bank", "run-1")
    assert failed is not None and failed.state == RunState.FAILED and failed.last_error == "ConnectionConfigError"
    resumed = admit_run(ledger, "bank", "run-1")  # the setting fixed, the task cleared
    assert resumed is not None and resumed.state == RunState.PINNED and resumed.watermark == Lsn(100)


def test_a_failed_run_retried_before_any_other_run_resumes(ledger: Ledger) -> None:
    ledger.pin_run("bank", "run-1", Lsn(100))
    settle_failure(ledger, "bank", "run-1", RuntimeError("member code"), will_retry=False)
    resumed = admit_run(ledger, "bank", "run-1")
    assert resumed is not None and resumed.state == RunState.PINNED and resumed.watermark == Lsn(100)
    with pytest.raises(GroupBusyError):
        claim_group(ledger, "bank", "run-2")


def test_a_pending_run_whose_orchestrator_ended_is_failed_and_taken_over(ledger: Ledger) -> None:
    ledger.pin_run("bank", "run-1", Lsn(100), DagRunRef("bank_dag", "killed"))
    ledger.pin_run("other", "run-9", Lsn(100), DagRunRef("other_dag", "running"))

    def ended(run: RunRecord) -> bool:
        return run.dag_run is not None and run.dag_run.run_id == "killed"

    claim_group(ledger, "bank", "run-2", finished=ended)
    record = ledger.get_run("bank", "run-1")
    assert record is not None and record.state == RunState.FAILED and record.last_error == "RunEnded"
    with pytest.raises(GroupBusyError):
        claim_group(ledger, "other", "run-3", finished=ended)


def test_supersede_by_hand_refuses_finished_runs(ledger: Ledger) -> None:
    ledger.pin_run("bank", "run-1", Lsn(100))
    with ledger.begin() as connection:
        ledger.record_cut(connection, "bank", "run-1", Lsn(100), {})
        ledger.mark_published(connection, "bank", "run-1", Lsn(100), 1)
    with pytest.raises(LedgerError, match="run 'run-1' published cut 1; only unpublished runs"):
        supersede_run(ledger, "bank", "run-1")
    ledger.pin_run("bank", "run-2", Lsn(100))
    ledger.set_run_state("bank", "run-2", RunState.UNCHANGED, cut_id=1)
    with pytest.raises(LedgerError, match="run 'run-2' finished unchanged"):
        supersede_run(ledger, "bank", "run-2")
    ledger.pin_run("bank", "run-3", Lsn(300))
    assert supersede_run(ledger, "bank", "run-3").state == RunState.SUPERSEDED
    with pytest.raises(LedgerError, match="group 'bank' has no run 'nope'"):
        supersede_run(ledger, "bank", "nope")


def test_an_unchanged_run_frees_the_group_and_counts_as_a_check(ledger: Ledger) -> None:
    ledger.pin_run("bank", "run-1", Lsn(100))
    with ledger.begin() as connection:
        ledger.record_cut(connection, "bank", "run-1", Lsn(100), {})
        ledger.mark_published(connection, "bank", "run-1", Lsn(100), 1)
    ledger.pin_run("bank", "run-2", Lsn(100))
    assert ledger.set_run_state("bank", "run-2", RunState.UNCHANGED, only_from=RunState.PINNED, cut_id=1)
    record = ledger.get_run("bank", "run-2")
    assert record is not None
    unchanged = UnchangedRun.of(record)
    assert unchanged.message().startswith("unchanged since cut 1 (W=0/64), checked at ")
    assert unchanged.summary()["outcome"] == "unchanged"
    assert unchanged.summary()["watermark_lsn"] == unchanged.summary()["watermark"] == "0/64"  # the key, its alias
    assert pending_runs(ledger, "bank") == []
    last = ledger.last_check("bank")
    assert last is not None and last.run_key == "run-2"
    first = ledger.get_run("bank", "run-1")
    assert first is not None
    with pytest.raises(LedgerError, match="is published, not unchanged"):
        UnchangedRun.of(first)


def test_a_run_superseded_before_its_commit_cannot_publish(ledger: Ledger) -> None:
    ledger.pin_run("bank", "run-1", Lsn(100))
    claim_group(ledger, "bank", "run-2", supersede=True)  # run-1 is superseded while it builds its cut
    with pytest.raises(PublishConflictError, match="run 'run-1' is no longer pinned"), ledger.begin() as connection:
        ledger.record_cut(connection, "bank", "run-1", Lsn(100), {})
        ledger.mark_published(connection, "bank", "run-1", Lsn(100), 1)
    assert ledger.last_cut("bank") is None  # rolled back whole
    assert ledger.published_run_keys("bank") == set()


def test_superseding_leaves_a_run_that_published_meanwhile_alone(ledger: Ledger) -> None:
    ledger.pin_run("bank", "run-1", Lsn(100))
    pending = pending_runs(ledger, "bank")
    with ledger.begin() as connection:
        ledger.record_cut(connection, "bank", "run-1", Lsn(100), {})
        ledger.mark_published(connection, "bank", "run-1", Lsn(100), 1)
    for other in pending:  # what claim_group does with the list it read before the publish
        assert not ledger.set_run_state("bank", other.run_key, RunState.SUPERSEDED, only_from=RunState.PINNED)
    record = ledger.get_run("bank", "run-1")
    assert record is not None and record.state == RunState.PUBLISHED and record.cut_id == 1
    assert ledger.published_run_keys("bank") == {"run-1"}
