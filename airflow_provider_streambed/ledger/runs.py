"""Runs in the ledger: each run's pinned W, state and outcome.

A run pins its W before any other work (:meth:`RunLedger.pin_run`); the first W pinned for a run
key is the run's for good. Which run may go on is :mod:`.claims`' business.

Run states (``docs/concepts.md``, "Run outcomes")::

    pinned ──► published              a cut was published at its W
       │ └───► unchanged              W equals the last cut's W: nothing to publish, a success
       ├─────► failed ──► pinned      released its claim; resumed if retried before a new run took over
       └─────► superseded             abandoned for another run; never publishes
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from enum import StrEnum

from sqlalchemy import Connection, RowMapping, insert, select, update
from sqlalchemy.exc import IntegrityError

from airflow_provider_streambed.exceptions import LedgerError, PublishConflictError
from airflow_provider_streambed.ledger.database import LedgerDatabase
from airflow_provider_streambed.ledger.schema import as_utc, cuts_table, expired_cuts_table, now, runs_table
from airflow_provider_streambed.lsn import Lsn


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
        holdback: the visibility report of the run's capture: how many transactions were open
            longer than the threshold at pin time, and the oldest one's age in seconds; ``None``
            when not recorded (the probe failed, or the run predates the figures).
        newest_commit_at: when the newest source transaction of the group's tables that the run
            captured committed (``None``: it captured none, or predates the figure).
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
    holdback: tuple[int, float] | None = None
    newest_commit_at: dt.datetime | None = None

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
            holdback=None if row["holdback_count"] is None
            else (int(row["holdback_count"]), float(row["holdback_oldest_seconds"] or 0.0)),
            newest_commit_at=None if row["newest_commit_at"] is None else as_utc(row["newest_commit_at"]),
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
            "watermark_lsn": str(self.watermark),
            "watermark": str(self.watermark),  # the key of earlier releases, kept for one release
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

    def published_run_keys(self, group: str) -> set[str]:
        """The keys of the group's runs that have a cut, kept or expired (their files may back later cuts)."""
        kept = select(cuts_table.c.run_key).where(cuts_table.c.group_name == group)
        expired = select(expired_cuts_table.c.run_key).where(expired_cuts_table.c.group_name == group)
        with self.engine.connect() as conn:
            return set(conn.execute(kept.union(expired)).scalars())

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

    def record_holdback(self, group: str, run_key: str, count: int, oldest_seconds: float) -> None:
        """Store the visibility report of the run's capture (the latest attempt's figures win)."""
        statement = (
            update(runs_table)
            .where(runs_table.c.group_name == group, runs_table.c.run_key == run_key)
            .values(holdback_count=count, holdback_oldest_seconds=oldest_seconds)
        )
        with self.engine.begin() as conn:
            conn.execute(statement)

    def record_newest_commit(self, group: str, run_key: str, at: dt.datetime) -> None:
        """Store when the newest transaction the run's capture kept committed (the latest attempt's wins)."""
        statement = (
            update(runs_table)
            .where(runs_table.c.group_name == group, runs_table.c.run_key == run_key)
            .values(newest_commit_at=at)
        )
        with self.engine.begin() as conn:
            conn.execute(statement)

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

        Raises:
            PublishConflictError: the run is in the ledger but no longer pinned (superseded, or
                published by a concurrent publisher meanwhile); the caller's transaction rolls back.
        """
        run = self.get_run(group, run_key, connection)
        if run is not None and not self.set_run_state(
            group, run_key, RunState.PUBLISHED, connection, only_from=RunState.PINNED, cut_id=cut_id
        ):
            raise PublishConflictError(
                f"group {group!r}, run {run_key!r} is no longer pinned (it was superseded or published meanwhile); "
                "nothing was published"
            )
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
