"""The run ledger: pinned watermarks per run and published cuts per group.

The ledger lives in the Iceberg ``SqlCatalog``'s own database (an SQLite file or a PostgreSQL
database), so a cut's ledger rows and the member tables' pointer updates can be written in one
database transaction. Three tables:

- ``streambed_runs``: one row per ``(group, run key)`` with the pinned watermark ``W`` and the
  run's state. Written before any other work of a run, so a retried or cleared task finds it.
- ``streambed_cuts``: one row per published cut, numbered 1, 2, 3, ... per group, with unique
  ``(group, run key)`` and ``(group, watermark)``: two publishers of one run make one cut.
- ``streambed_cut_members``: per cut and member, the Iceberg table, snapshot id and metadata
  location that make up the cut.

LSNs are stored as integers (ordered) and rendered with :class:`~airflow_provider_streambed.lsn.Lsn`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum

from sqlalchemy import (
    BigInteger,
    Column,
    ColumnElement,
    Connection,
    DateTime,
    Engine,
    ForeignKeyConstraint,
    MetaData,
    Numeric,
    PrimaryKeyConstraint,
    RowMapping,
    String,
    Table,
    UniqueConstraint,
    create_engine,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError

from airflow_provider_streambed.exceptions import CutNotFoundError, LedgerError
from airflow_provider_streambed.lsn import Lsn

# pg_lsn is unsigned 64-bit; NUMERIC(20) holds it on PostgreSQL, SQLite stores the integer.
_LSN = Numeric(20, 0).with_variant(BigInteger(), "sqlite")

metadata = MetaData()

runs_table = Table(
    "streambed_runs",
    metadata,
    Column("group_name", String(64), nullable=False),
    Column("run_key", String(200), nullable=False),
    Column("watermark", _LSN, nullable=False),
    Column("state", String(16), nullable=False),
    Column("pinned_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    PrimaryKeyConstraint("group_name", "run_key"),
)

cuts_table = Table(
    "streambed_cuts",
    metadata,
    Column("group_name", String(64), nullable=False),
    Column("cut_id", BigInteger, nullable=False),
    Column("watermark", _LSN, nullable=False),
    Column("prev_watermark", _LSN, nullable=True),
    Column("run_key", String(200), nullable=False),
    Column("published_at", DateTime(timezone=True), nullable=False),
    PrimaryKeyConstraint("group_name", "cut_id"),
    UniqueConstraint("group_name", "run_key", name="streambed_cuts_run_key"),
    UniqueConstraint("group_name", "watermark", name="streambed_cuts_watermark"),
)

cut_members_table = Table(
    "streambed_cut_members",
    metadata,
    Column("group_name", String(64), nullable=False),
    Column("cut_id", BigInteger, nullable=False),
    Column("member", String(64), nullable=False),
    Column("table_identifier", String(255), nullable=False),
    Column("snapshot_id", BigInteger, nullable=False),
    Column("metadata_location", String(1000), nullable=False),
    PrimaryKeyConstraint("group_name", "cut_id", "member"),
    ForeignKeyConstraint(["group_name", "cut_id"], ["streambed_cuts.group_name", "streambed_cuts.cut_id"]),
)


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


@dataclass(frozen=True, slots=True)
class CutMember:
    """One member table's snapshot in a cut."""

    member: str
    table_identifier: str
    snapshot_id: int
    metadata_location: str


@dataclass(frozen=True, slots=True)
class CutRecord:
    """A published cut of a group: its number, watermark and member snapshots."""

    group: str
    cut_id: int
    watermark: Lsn
    prev_watermark: Lsn | None
    run_key: str
    published_at: dt.datetime
    members: Mapping[str, CutMember]


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _utc(value: dt.datetime) -> dt.datetime:
    """SQLite returns naive datetimes; every time we store is UTC."""
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


class Ledger:
    """Reads and writes the run ledger in a catalog database.

    Args:
        engine: an SQLAlchemy engine on the catalog database (the one pyiceberg's ``SqlCatalog``
            uses, e.g. ``catalog.engine``), or a database URI.
    """

    def __init__(self, engine: Engine | str) -> None:
        self.engine = create_engine(engine) if isinstance(engine, str) else engine

    def create(self) -> None:
        """Create the ledger tables if they are missing; safe to call concurrently."""
        for attempt in range(3):
            try:
                metadata.create_all(self.engine, checkfirst=True)
                return
            except (IntegrityError, ProgrammingError, OperationalError) as error:
                # Another process created the same table between our check and our CREATE.
                if attempt == 2:
                    raise LedgerError(f"cannot create the streambed ledger tables: {error}") from error

    @contextmanager
    def begin(self) -> Iterator[Connection]:
        """A write transaction that commits on clean exit and rolls back on error.

        On SQLite it takes the write lock at once (``BEGIN IMMEDIATE``), so two writers that read
        before they write are serialised instead of failing with "database is locked".
        """
        with self.engine.connect() as connection:
            if connection.dialect.name == "sqlite":
                connection.exec_driver_sql("BEGIN IMMEDIATE")
            try:
                yield connection
            except BaseException:
                connection.rollback()
                raise
            connection.commit()

    # Runs -----------------------------------------------------------------------------------

    def pin_run(self, group: str, run_key: str, watermark: Lsn) -> RunRecord:
        """Record ``watermark`` for a run unless one is recorded already; return what is stored.

        The first writer wins: a second call (a retry, or a concurrent duplicate run) gets the
        watermark pinned first, never its own.
        """
        now = _now()
        row = {
            "group_name": group,
            "run_key": run_key,
            "watermark": watermark.value,
            "state": RunState.PINNED.value,
            "pinned_at": now,
            "updated_at": now,
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
        with self._connection(connection) as conn:
            row = conn.execute(query).mappings().first()
        if row is None:
            return None
        return RunRecord(
            group=row["group_name"],
            run_key=row["run_key"],
            watermark=Lsn(int(row["watermark"])),
            state=RunState(row["state"]),
            pinned_at=_utc(row["pinned_at"]),
        )

    def set_run_state(self, group: str, run_key: str, state: RunState, connection: Connection | None = None) -> None:
        """Move a run to ``state`` (inside ``connection``'s transaction when given)."""
        statement = (
            update(runs_table)
            .where(runs_table.c.group_name == group, runs_table.c.run_key == run_key)
            .values(state=state.value, updated_at=_now())
        )
        with self._connection(connection, write=True) as conn:
            if conn.execute(statement).rowcount != 1:
                raise LedgerError(f"group {group!r}, run {run_key!r}: no pinned run to mark {state.value}")

    # Cuts -----------------------------------------------------------------------------------

    def record_cut(
        self,
        connection: Connection,
        group: str,
        run_key: str,
        watermark: Lsn,
        members: Mapping[str, CutMember],
    ) -> CutRecord:
        """Insert the next cut of ``group`` inside the caller's transaction.

        The caller commits it together with the member tables' pointer updates. The unique keys
        make a concurrent publisher of the same run or watermark fail with ``IntegrityError``
        at insert or commit time, so one run never yields two cuts.

        Raises:
            LedgerError: ``watermark`` does not exceed the group's last cut.
        """
        last = self.last_cut(group, connection)
        if last is not None and watermark <= last.watermark:
            raise LedgerError(
                f"group {group!r}: watermark {watermark} must be greater than cut {last.cut_id}'s {last.watermark}"
            )
        record = CutRecord(
            group=group,
            cut_id=1 if last is None else last.cut_id + 1,
            watermark=watermark,
            prev_watermark=None if last is None else last.watermark,
            run_key=run_key,
            published_at=_now(),
            members=dict(members),
        )
        connection.execute(
            insert(cuts_table).values(
                group_name=group,
                cut_id=record.cut_id,
                watermark=watermark.value,
                prev_watermark=None if record.prev_watermark is None else record.prev_watermark.value,
                run_key=run_key,
                published_at=record.published_at,
            )
        )
        if members:
            connection.execute(
                insert(cut_members_table),
                [
                    {
                        "group_name": group,
                        "cut_id": record.cut_id,
                        "member": m.member,
                        "table_identifier": m.table_identifier,
                        "snapshot_id": m.snapshot_id,
                        "metadata_location": m.metadata_location,
                    }
                    for m in members.values()
                ],
            )
        return record

    def last_cut(self, group: str, connection: Connection | None = None) -> CutRecord | None:
        """The group's newest cut, or ``None`` before the first publish."""
        newest = select(func.max(cuts_table.c.cut_id)).where(cuts_table.c.group_name == group).scalar_subquery()
        found = self._cuts(group, cuts_table.c.cut_id == newest, connection)
        return found[0] if found else None

    def get_cut(self, group: str, cut_id: int, connection: Connection | None = None) -> CutRecord:
        """Cut ``cut_id`` of ``group``.

        Raises:
            CutNotFoundError: no such cut.
        """
        found = self._cuts(group, cuts_table.c.cut_id == cut_id, connection)
        if not found:
            raise CutNotFoundError(f"group {group!r} has no cut {cut_id}")
        return found[0]

    def cut_for_run(self, group: str, run_key: str, connection: Connection | None = None) -> CutRecord | None:
        """The cut a run published, or ``None`` if it has not published."""
        found = self._cuts(group, cuts_table.c.run_key == run_key, connection)
        return found[0] if found else None

    def cut_as_of(self, group: str, lsn: Lsn, connection: Connection | None = None) -> CutRecord:
        """The newest cut whose watermark is at most ``lsn``.

        Raises:
            CutNotFoundError: every cut is newer than ``lsn``, or there is none.
        """
        newest = (
            select(func.max(cuts_table.c.cut_id))
            .where(cuts_table.c.group_name == group, cuts_table.c.watermark <= lsn.value)
            .scalar_subquery()
        )
        found = self._cuts(group, cuts_table.c.cut_id == newest, connection)
        if not found:
            raise CutNotFoundError(f"group {group!r} has no cut at or before LSN {lsn}")
        return found[0]

    def list_cuts(self, group: str, connection: Connection | None = None) -> list[CutRecord]:
        """Every cut of ``group``, oldest first."""
        return self._cuts(group, None, connection)

    def _cuts(
        self, group: str, condition: ColumnElement[bool] | None, connection: Connection | None
    ) -> list[CutRecord]:
        """Cuts of ``group`` matching ``condition`` with their members, read in one query."""
        cuts, members = cuts_table, cut_members_table
        member_columns = [members.c[c] for c in ("member", "table_identifier", "snapshot_id", "metadata_location")]
        query = (
            select(cuts, *member_columns)
            .outerjoin(members, (members.c.group_name == cuts.c.group_name) & (members.c.cut_id == cuts.c.cut_id))
            .where(cuts.c.group_name == group)
            .order_by(cuts.c.cut_id, members.c.member)
        )
        if condition is not None:
            query = query.where(condition)
        with self._connection(connection) as conn:
            rows = conn.execute(query).mappings().all()
        heads: dict[int, RowMapping] = {}
        member_maps: dict[int, dict[str, CutMember]] = {}
        for row in rows:
            cut_id = int(row["cut_id"])
            heads.setdefault(cut_id, row)
            found = member_maps.setdefault(cut_id, {})
            if row["member"] is not None:
                found[row["member"]] = CutMember(
                    member=row["member"],
                    table_identifier=row["table_identifier"],
                    snapshot_id=int(row["snapshot_id"]),
                    metadata_location=row["metadata_location"],
                )
        return [
            CutRecord(
                group=row["group_name"],
                cut_id=cut_id,
                watermark=Lsn(int(row["watermark"])),
                prev_watermark=None if row["prev_watermark"] is None else Lsn(int(row["prev_watermark"])),
                run_key=row["run_key"],
                published_at=_utc(row["published_at"]),
                members=member_maps[cut_id],
            )
            for cut_id, row in heads.items()
        ]

    @contextmanager
    def _connection(self, connection: Connection | None, write: bool = False) -> Iterator[Connection]:
        """``connection`` itself, or a fresh one (committed on exit when ``write``)."""
        if connection is not None:
            yield connection
        elif write:
            with self.engine.begin() as conn:
                yield conn
        else:
            with self.engine.connect() as conn:
                yield conn
