"""Runs in the ledger: each run's pinned W and state, and the serialisation of a group's runs.

A run pins its W before any other work (:meth:`RunLedger.pin_run`); the first W pinned for a run
key is the run's for good. At most one unpublished run of a group holds a pinned W at a time:
two runs that pinned concurrently would race to publish, and the loser would have done its work
for nothing. :func:`claim_group` makes the second run fail clearly before it pins (and
:func:`confirm_claim`, after pinning, resolves a race between two runs that both passed the
check: the run pinned later gives way). A run that failed and will not be retried can be
superseded, which frees the group for the next run.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass
from enum import StrEnum

from sqlalchemy import Connection, and_, exists, insert, select, update
from sqlalchemy.exc import IntegrityError

from airflow_provider_streambed.exceptions import GroupBusyError, LedgerError
from airflow_provider_streambed.ledger.database import LedgerDatabase
from airflow_provider_streambed.ledger.schema import as_utc, cuts_table, now, runs_table
from airflow_provider_streambed.lsn import Lsn

logger = logging.getLogger(__name__)


class RunState(StrEnum):
    """Where a run stands. ``pinned`` → ``published``; ``superseded`` runs are never published."""

    PINNED = "pinned"
    PUBLISHED = "published"
    SUPERSEDED = "superseded"


@dataclass(frozen=True, slots=True)
class RunRecord:
    """A run's pinned watermark and state."""

    group: str
    run_key: str
    watermark: Lsn
    state: RunState
    pinned_at: dt.datetime


class RunLedger(LedgerDatabase):
    """The ledger's runs: one row per ``(group, run key)`` with the pinned W and the run's state."""

    def pin_run(self, group: str, run_key: str, watermark: Lsn) -> RunRecord:
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
        if row is None:
            return None
        return RunRecord(
            group=row["group_name"],
            run_key=row["run_key"],
            watermark=Lsn(int(row["watermark"])),
            state=RunState(row["state"]),
            pinned_at=as_utc(row["pinned_at"]),
        )

    def set_run_state(self, group: str, run_key: str, state: RunState, connection: Connection | None = None) -> None:
        """Move a run to ``state`` (inside ``connection``'s transaction when given)."""
        statement = (
            update(runs_table)
            .where(runs_table.c.group_name == group, runs_table.c.run_key == run_key)
            .values(state=state.value, updated_at=now())
        )
        with self.connection(connection, write=True) as conn:
            if conn.execute(statement).rowcount != 1:
                raise LedgerError(f"group {group!r}, run {run_key!r}: no pinned run to mark {state.value}")


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


def claim_group(ledger: RunLedger, group: str, run_key: str, *, supersede: bool = False) -> None:
    """Check, before pinning, that no other run of ``group`` is pinned and unpublished.

    Args:
        ledger: the group's ledger.
        group: the group name.
        run_key: the run that wants to pin.
        supersede: mark the other pending runs superseded (they can then never publish)
            instead of failing.

    Raises:
        GroupBusyError: another run is pending and ``supersede`` is false.
    """
    others = [record for record in pending_runs(ledger, group) if record.run_key != run_key]
    if not others:
        return
    if not supersede:
        other = others[0]
        raise GroupBusyError(
            f"group {group!r}: run {other.run_key!r} pinned W={other.watermark} at {other.pinned_at:%Y-%m-%d %H:%M:%S} "
            f"and has not published; runs of a group are serialised, so run {run_key!r} cannot start. "
            "Retry (clear) that run so it publishes, or start this one with supersede_pending_runs=True "
            "to abandon it."
        )
    for other in others:
        ledger.set_run_state(group, other.run_key, RunState.SUPERSEDED)
        logger.warning("group=%s run=%s W=%s: superseded by run %s", group, other.run_key, other.watermark, run_key)


def confirm_claim(ledger: RunLedger, group: str, run_key: str) -> None:
    """After pinning: if a run pinned earlier is also pending, this run gives way.

    Closes the window between :func:`claim_group` and the pin, when two runs start at once:
    both see both pins, and only the earlier one goes on.

    Raises:
        GroupBusyError: a run pinned before this one is pending; this run is marked superseded.
    """
    pending = pending_runs(ledger, group)
    keys = [record.run_key for record in pending]
    if run_key not in keys or keys[0] == run_key:
        return
    ledger.set_run_state(group, run_key, RunState.SUPERSEDED)
    raise GroupBusyError(
        f"group {group!r}: run {keys[0]!r} pinned its W first and is still unpublished; run {run_key!r} "
        "started at the same time and was superseded (trigger a new run after the other publishes)"
    )
