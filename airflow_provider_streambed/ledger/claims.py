"""Serialising the runs of a group: at most one unpublished run holds the group's claim.

Two runs of one group that pinned their watermarks concurrently would race to publish, and the
loser would have done its work for nothing. :func:`claim_group` makes a second run fail clearly
before it pins; :func:`confirm_claim`, after pinning, resolves a race between two runs that both
passed the check (the run pinned later gives way) and takes over from failed runs.
:func:`admit_run` lets each step of a run go on (resuming a failed run nobody replaced),
:func:`settle_failure` records a failed step and frees the group when the run is done for, and
:func:`supersede_run` frees it by hand.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from sqlalchemy import and_, exists, select, update

from airflow_provider_streambed.exceptions import GroupBusyError, LedgerError, RunSupersededError, is_final
from airflow_provider_streambed.ledger.runs import RunLedger, RunRecord, RunState
from airflow_provider_streambed.ledger.schema import cuts_table, now, runs_table

logger = logging.getLogger(__name__)


def pending_runs(ledger: RunLedger, group: str) -> list[RunRecord]:
    """Runs of ``group`` that are pinned and have no cut, oldest pin first."""
    published = exists().where(and_(cuts_table.c.group_name == group, cuts_table.c.run_key == runs_table.c.run_key))
    query = (
        select(runs_table.c.run_key)
        .where(runs_table.c.group_name == group, runs_table.c.state == RunState.PINNED.value, ~published)
        .order_by(runs_table.c.pinned_at, runs_table.c.run_key)
    )
    with ledger.engine.connect() as connection:
        keys = list(connection.execute(query).scalars())
    records = [ledger.get_run(group, key) for key in keys]
    return [record for record in records if record is not None]


def _busy_message(group: str, run_key: str, other: RunRecord) -> str:
    minutes = other.age().total_seconds() / 60
    origin = f" ({other.dag_run})" if other.dag_run else ""
    failure = f", last failure {other.last_error}" if other.last_error else ""
    return (
        f"group {group!r}: run {other.run_key!r}{origin} pinned W={other.watermark} {minutes:.0f} min ago "
        f"and has not published{failure}; runs of a group are serialised, so run {run_key!r} cannot start. "
        "Either clear (retry) that run so it publishes, or supersede it: trigger this run with the Param "
        f"supersede_pending_runs, or run `streambed runs supersede --group {group} {other.run_key}`."
    )


def claim_group(
    ledger: RunLedger,
    group: str,
    run_key: str,
    *,
    supersede: bool = False,
    finished: Callable[[RunRecord], bool] | None = None,
) -> None:
    """Check, before pinning, that no other run of ``group`` is pinned and unpublished.

    Args:
        ledger: the group's ledger.
        group: the group name.
        run_key: the run that wants to pin.
        supersede: mark the other pending runs superseded (they can then never publish)
            instead of failing.
        finished: tells whether a pending run's orchestrator is done with it for good (in Airflow:
            its DAG run has ended, so no retry will come); such a run is marked failed and frees
            the group, as if it had released the claim itself.

    Raises:
        GroupBusyError: another run is pending and ``supersede`` is false; names the run, its age,
            its DAG run and the two ways out.
    """
    others = [record for record in pending_runs(ledger, group) if record.run_key != run_key]
    if finished is not None:
        for other in [record for record in others if finished(record)]:
            ledger.set_run_state(group, other.run_key, RunState.FAILED, only_from=RunState.PINNED,
                                 last_error=other.last_error or "RunEnded")
            logger.warning("group=%s run=%s W=%s: its DAG run ended unpublished; the run is failed and frees the "
                           "group", group, other.run_key, other.watermark)
            others.remove(other)
    if others and not supersede:
        raise GroupBusyError(_busy_message(group, run_key, others[0]))
    for other in others:
        if not ledger.set_run_state(group, other.run_key, RunState.SUPERSEDED, only_from=RunState.PINNED,
                                    replaced_by=run_key):
            continue  # it published (or failed) meanwhile
        logger.warning("group=%s run=%s W=%s: superseded by run %s", group, other.run_key, other.watermark, run_key)


def confirm_claim(ledger: RunLedger, group: str, run_key: str) -> list[str]:
    """After pinning: give way to a run pinned earlier, else take over from the group's failed runs.

    Closes the window between :func:`claim_group` and the pin, when two runs start at once: both
    see both pins, and only the earlier one goes on. The run that goes on records itself as the
    replacement of every failed run not yet replaced (its W covers their changes, since the slot
    moves only on publish), so clearing one of those later says which run replaced it.

    Returns:
        The keys of the failed runs this run took over from.

    Raises:
        RunSupersededError: a run pinned before this one is pending; this run is marked superseded.
    """
    pending = pending_runs(ledger, group)
    keys = [record.run_key for record in pending]
    if run_key in keys and keys[0] != run_key:
        ledger.set_run_state(group, run_key, RunState.SUPERSEDED, replaced_by=keys[0])
        raise RunSupersededError(
            f"group {group!r}: run {keys[0]!r} pinned its W first and is still unpublished; run {run_key!r} "
            "started at the same time and was superseded (trigger a new run after the other publishes)"
        )
    failed = (runs_table.c.group_name == group) & (runs_table.c.state == RunState.FAILED.value)
    statement = (
        update(runs_table)
        .where(failed, runs_table.c.replaced_by.is_(None), runs_table.c.run_key != run_key)
        .values(replaced_by=run_key, updated_at=now())
    )
    with ledger.begin() as connection:  # no UPDATE ... RETURNING: older SQLite lacks it
        connection.execute(statement)
        taken = sorted(connection.execute(select(runs_table.c.run_key).where(
            failed, runs_table.c.replaced_by == run_key)).scalars())
    for failed in taken:
        logger.warning("group=%s run=%s: takes over from failed run %s", group, run_key, failed)
    return taken


def admit_run(
    ledger: RunLedger,
    group: str,
    run_key: str,
    *,
    supersede: bool = False,
    finished: Callable[[RunRecord], bool] | None = None,
) -> RunRecord | None:
    """Let a step of run ``run_key`` go on: the run's record, or ``None`` for a run yet to pin.

    A new run must claim the group first (:func:`claim_group`). A failed run that no other run has
    taken over is resumed (back to ``pinned``, claiming the group again), so a task cleared after
    its retries ran out goes on with its W.

    Raises:
        GroupBusyError: see :func:`claim_group`.
        RunSupersededError: the run was superseded, or failed and another run took over from it.
    """
    record = ledger.get_run(group, run_key)
    if record is not None and (record.replaced_by is not None or record.state == RunState.SUPERSEDED):
        how = "was superseded by" if record.state == RunState.SUPERSEDED else "failed and was replaced by"
        by = f"run {record.replaced_by}" if record.replaced_by else "hand (streambed runs supersede)"
        raise RunSupersededError(
            f"group {group!r}: run {run_key!r} (W={record.watermark}) {how} {by}, "
            "whose cuts cover its changes; it can never publish: trigger a new run instead of clearing this one"
        )
    if record is None or record.state == RunState.FAILED:
        claim_group(ledger, group, run_key, supersede=supersede, finished=finished)
    if record is not None and record.state == RunState.FAILED:
        ledger.set_run_state(group, run_key, RunState.PINNED, only_from=RunState.FAILED)
        logger.info("group=%s run=%s W=%s: resuming the failed run", group, run_key, record.watermark)
        record = ledger.get_run(group, run_key)
    return record


def settle_failure(ledger: RunLedger, group: str, run_key: str, error: BaseException, *, will_retry: bool) -> bool:
    """Record a failed step of run ``run_key``; release the group unless the run will be retried.

    A final error (:func:`~airflow_provider_streambed.exceptions.is_final`) releases at once; a
    retryable one keeps the run's W and claim while ``will_retry``. A failure to reach the ledger
    here is logged, never raised over ``error``. Returns whether the run was released.
    """
    release = is_final(error) or not will_retry
    try:
        released = ledger.record_failure(group, run_key, error, release=release)
    except Exception as ledger_error:  # the step's own error is the one to report
        logger.warning("group=%s run=%s: could not record the failure in the ledger: %s", group, run_key,
                       ledger_error)
        return False
    if released:
        kind = "a final error" if is_final(error) else "its last try"
        logger.warning("group=%s run=%s: failed with %s (%s); the run is failed and frees the group for the next "
                       "run", group, run_key, kind, type(error).__name__)
    return released


def supersede_run(ledger: RunLedger, group: str, run_key: str) -> RunRecord:
    """Abandon run ``run_key`` by hand (``streambed runs supersede``): it can never publish.

    Raises:
        LedgerError: no such run, or it already finished (published or unchanged).
    """
    record = ledger.get_run(group, run_key)
    if record is None:
        raise LedgerError(f"group {group!r} has no run {run_key!r}")
    if record.state in (RunState.PUBLISHED, RunState.UNCHANGED):
        what = f"published cut {record.cut_id}" if record.state == RunState.PUBLISHED else "finished unchanged"
        raise LedgerError(f"group {group!r}, run {run_key!r} {what}; only unpublished runs can be superseded")
    if not any(ledger.set_run_state(group, run_key, RunState.SUPERSEDED, only_from=state)
               for state in (RunState.PINNED, RunState.FAILED)):
        raise LedgerError(f"group {group!r}, run {run_key!r} finished meanwhile; only unpublished runs can be "
                          "superseded")
    logger.warning("group=%s run=%s W=%s: superseded by hand", group, run_key, record.watermark)
    found = ledger.get_run(group, run_key)
    assert found is not None
    return found
