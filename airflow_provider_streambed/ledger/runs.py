"""Runs in the ledger: each run's pinned W and state, and the serialisation of a group's runs.

A run pins its W before any other work (:meth:`RunLedger.pin_run`); the first W pinned for a run
key is the run's for good. At most one unpublished run of a group holds a pinned W (the group's
*claim*) at a time: two runs that pinned concurrently would race to publish, and the loser would
have done its work for nothing. :func:`claim_group` makes a second run fail clearly before it
pins, and :func:`confirm_claim`, after pinning, resolves a race between two runs that both passed
the check (the run pinned later gives way) and takes over from failed runs.

Run states (``docs/concepts.md``, "Run outcomes")::

    pinned ──► published              a cut was published at its W
       │ └───► unchanged              W equals the last cut's W: nothing to publish, a success
       ├─────► failed ──► pinned      released its claim; resumed if retried before a new run took over
       └─────► superseded             abandoned for another run; never publishes
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from sqlalchemy import Connection, RowMapping, and_, exists, insert, select, update
from sqlalchemy.exc import IntegrityError

from airflow_provider_streambed.exceptions import GroupBusyError, LedgerError, RunSupersededError, is_final
from airflow_provider_streambed.ledger.database import LedgerDatabase
from airflow_provider_streambed.ledger.schema import as_utc, cuts_table, now, runs_table
from airflow_provider_streambed.lsn import Lsn

logger = logging.getLogger(__name__)


class RunState(StrEnum):
    """Where a run stands (see the module docstring for the transitions)."""

    PINNED = "pinned"
    PUBLISHED = "published"
    UNCHANGED = "unchanged"
    FAILED = "failed"
    SUPERSEDED = "superseded"


@dataclass(frozen=True, slots=True)
class DagRunRef:
    """The Airflow DAG run behind a run, for messages and for asking Airflow whether it finished."""

    dag_id: str
    run_id: str

    def __str__(self) -> str:
        return f"DAG {self.dag_id!r} run {self.run_id!r}"


@dataclass(frozen=True, slots=True)
class RunRecord:
    """A run's pinned watermark and state.

    Attributes:
        pinned_at: when W was pinned: when the run checked the source.
        cut_id: the cut the run published, or for an ``unchanged`` run the cut it found current.
        last_error: the class name of the run's last failure, if any.
        replaced_by: the run that superseded it or took over from it after it failed.
        dag_run: the Airflow DAG run, when Airflow ran it.
    """

    group: str
    run_key: str
    watermark: Lsn
    state: RunState
    pinned_at: dt.datetime
    updated_at: dt.datetime
    cut_id: int | None = None
    last_error: str | None = None
    replaced_by: str | None = None
    dag_run: DagRunRef | None = None

    def age(self) -> dt.timedelta:
        """Time since the run pinned its W."""
        return now() - self.pinned_at

    @classmethod
    def from_row(cls, row: RowMapping) -> RunRecord:
        """A record from a ``streambed_runs`` row."""
        dag_run = DagRunRef(row["dag_id"], row["dag_run_id"]) if row["dag_id"] and row["dag_run_id"] else None
        return cls(
            group=row["group_name"],
            run_key=row["run_key"],
            watermark=Lsn(int(row["watermark"])),
            state=RunState(row["state"]),
            pinned_at=as_utc(row["pinned_at"]),
            updated_at=as_utc(row["updated_at"]),
            cut_id=None if row["cut_id"] is None else int(row["cut_id"]),
            last_error=row["last_error"],
            replaced_by=row["replaced_by"],
            dag_run=dag_run,
        )


def unchanged_message(cut_id: int, watermark: Lsn, checked_at: dt.datetime) -> str:
    """How an unchanged run is told: ``unchanged since cut N (W=...), checked at T``."""
    return f"unchanged since cut {cut_id} (W={watermark}), checked at {checked_at:%Y-%m-%d %H:%M:%S} UTC"


@dataclass(frozen=True, slots=True)
class UnchangedRun:
    """A run whose W equals the group's last cut's W: no WAL since that cut, a success with no cut.

    Attributes:
        cut_id: the cut that stays current.
        checked_at: when the run checked the source (pinned its W).
    """

    group: str
    run_key: str
    watermark: Lsn
    cut_id: int
    checked_at: dt.datetime

    @classmethod
    def of(cls, record: RunRecord) -> UnchangedRun:
        """The outcome of an ``unchanged`` run's record."""
        if record.state != RunState.UNCHANGED or record.cut_id is None:
            raise LedgerError(f"group {record.group!r}, run {record.run_key!r} is {record.state.value}, not unchanged")
        return cls(record.group, record.run_key, record.watermark, record.cut_id, record.pinned_at)

    def message(self) -> str:
        """``unchanged since cut N (W=...), checked at T``: the line logs, XCom and the CLI show."""
        return unchanged_message(self.cut_id, self.watermark, self.checked_at)

    def summary(self) -> dict[str, object]:
        """Small JSON-able facts for XCom."""
        return {
            "group": self.group,
            "run_key": self.run_key,
            "outcome": "unchanged",
            "watermark": str(self.watermark),
            "cut_id": self.cut_id,
            "checked_at": self.checked_at.isoformat(),
            "message": self.message(),
        }


class RunLedger(LedgerDatabase):
    """The ledger's runs: one row per ``(group, run key)`` with the pinned W and the run's state."""

    def pin_run(self, group: str, run_key: str, watermark: Lsn, dag_run: DagRunRef | None = None) -> RunRecord:
        """Record ``watermark`` for a run unless one is recorded already; return what is stored.

        The first writer wins: a second call (a retry, or a concurrent duplicate run) gets the
        watermark pinned first, never its own.
        """
        pinned_at = now()
        row = {
            "group_name": group,
            "run_key": run_key,
            "watermark": watermark.value,
            "state": RunState.PINNED.value,
            "pinned_at": pinned_at,
            "updated_at": pinned_at,
            "dag_id": dag_run.dag_id if dag_run else None,
            "dag_run_id": dag_run.run_id if dag_run else None,
        }
        try:
            with self.engine.begin() as connection:
                connection.execute(insert(runs_table).values(**row))
        except IntegrityError:
            pass  # pinned before: the stored watermark wins
        record = self.get_run(group, run_key)
        if record is None:
            raise LedgerError(f"group {group!r}, run {run_key!r}: pinned watermark vanished from the ledger")
        return record

    def get_run(self, group: str, run_key: str, connection: Connection | None = None) -> RunRecord | None:
        """The run's record, or ``None`` if nothing was pinned for it."""
        query = select(runs_table).where(runs_table.c.group_name == group, runs_table.c.run_key == run_key)
        with self.connection(connection) as conn:
            row = conn.execute(query).mappings().first()
        return None if row is None else RunRecord.from_row(row)

    def list_runs(self, group: str, limit: int | None = None) -> list[RunRecord]:
        """The group's runs, newest pin first (at most ``limit``)."""
        query = (
            select(runs_table)
            .where(runs_table.c.group_name == group)
            .order_by(runs_table.c.pinned_at.desc(), runs_table.c.run_key.desc())
            .limit(limit)
        )
        with self.engine.connect() as conn:
            return [RunRecord.from_row(row) for row in conn.execute(query).mappings()]

    def last_check(self, group: str) -> RunRecord | None:
        """The newest run that checked the source and succeeded (``published`` or ``unchanged``)."""
        query = (
            select(runs_table)
            .where(
                runs_table.c.group_name == group,
                runs_table.c.state.in_([RunState.PUBLISHED.value, RunState.UNCHANGED.value]),
            )
            .order_by(runs_table.c.pinned_at.desc())
            .limit(1)
        )
        with self.engine.connect() as conn:
            row = conn.execute(query).mappings().first()
        return None if row is None else RunRecord.from_row(row)

    def set_run_state(
        self,
        group: str,
        run_key: str,
        state: RunState,
        connection: Connection | None = None,
        *,
        only_from: RunState | None = None,
        **values: object,
    ) -> bool:
        """Move a run to ``state`` and set further columns (inside ``connection``'s transaction when given).

        Args:
            only_from: move the run only if it is in this state; returns whether it moved.
            **values: other ``streambed_runs`` columns to set (``cut_id``, ``replaced_by``, ...).

        Raises:
            LedgerError: the run is not in the ledger (and ``only_from`` is not given).
        """
        condition = [runs_table.c.group_name == group, runs_table.c.run_key == run_key]
        if only_from is not None:
            condition.append(runs_table.c.state == only_from.value)
        statement = update(runs_table).where(*condition).values(state=state.value, updated_at=now(), **values)
        with self.connection(connection, write=True) as conn:
            moved = conn.execute(statement).rowcount == 1
        if not moved and only_from is None:
            raise LedgerError(f"group {group!r}, run {run_key!r}: no pinned run to mark {state.value}")
        return moved

    def mark_published(self, connection: Connection, group: str, run_key: str, watermark: Lsn, cut_id: int) -> None:
        """In the publish transaction: the run published ``cut_id``; older pinned runs are superseded.

        A pinned run at or below W can never publish now (W strictly increases).
        """
        if self.get_run(group, run_key, connection) is not None:
            self.set_run_state(group, run_key, RunState.PUBLISHED, connection, cut_id=cut_id)
        connection.execute(
            update(runs_table)
            .where(
                runs_table.c.group_name == group,
                runs_table.c.state == RunState.PINNED.value,
                runs_table.c.watermark <= watermark.value,
                runs_table.c.run_key != run_key,
            )
            .values(state=RunState.SUPERSEDED.value, replaced_by=run_key, updated_at=now())
        )

    def record_failure(self, group: str, run_key: str, error: BaseException, *, release: bool) -> bool:
        """Note a failure of the run; with ``release`` a pinned run becomes ``failed`` and frees the group.

        Returns whether the run was released. A run that is not pinned (published, unchanged,
        superseded, or never pinned) is left as it is.
        """
        error_name = type(error).__name__[:200]
        if release:
            return self.set_run_state(group, run_key, RunState.FAILED, only_from=RunState.PINNED, last_error=error_name)
        self.set_run_state(group, run_key, RunState.PINNED, only_from=RunState.PINNED, last_error=error_name)
        return False


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
        ledger.set_run_state(group, other.run_key, RunState.SUPERSEDED, replaced_by=run_key)
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
    statement = (
        update(runs_table)
        .where(runs_table.c.group_name == group, runs_table.c.state == RunState.FAILED.value,
               runs_table.c.replaced_by.is_(None), runs_table.c.run_key != run_key)
        .values(replaced_by=run_key, updated_at=now())
        .returning(runs_table.c.run_key)
    )
    with ledger.engine.begin() as connection:
        taken = sorted(connection.execute(statement).scalars())
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
    ledger.set_run_state(group, run_key, RunState.SUPERSEDED)
    logger.warning("group=%s run=%s W=%s: superseded by hand", group, run_key, record.watermark)
    found = ledger.get_run(group, run_key)
    assert found is not None
    return found
