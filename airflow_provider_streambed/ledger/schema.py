"""The ledger's tables in the catalog database, and creating them.

Three tables, written with SQLAlchemy Core so the same code serves SQLite and PostgreSQL:

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

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Engine,
    ForeignKeyConstraint,
    MetaData,
    Numeric,
    PrimaryKeyConstraint,
    String,
    Table,
    UniqueConstraint,
)
from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError

from airflow_provider_streambed.exceptions import LedgerError

# pg_lsn is unsigned 64-bit; NUMERIC(20) holds it on PostgreSQL, SQLite stores the integer.
LSN_TYPE = Numeric(20, 0).with_variant(BigInteger(), "sqlite")

metadata = MetaData()

runs_table = Table(
    "streambed_runs",
    metadata,
    Column("group_name", String(64), nullable=False),
    Column("run_key", String(200), nullable=False),
    Column("watermark", LSN_TYPE, nullable=False),
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
    Column("watermark", LSN_TYPE, nullable=False),
    Column("prev_watermark", LSN_TYPE, nullable=True),
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


def create_tables(engine: Engine) -> None:
    """Create the ledger tables if they are missing; safe to call concurrently.

    Raises:
        LedgerError: the tables cannot be created.
    """
    for attempt in range(3):
        try:
            metadata.create_all(engine, checkfirst=True)
            return
        except (IntegrityError, ProgrammingError, OperationalError) as error:
            # Another process created the same table between our check and our CREATE.
            if attempt == 2:
                raise LedgerError(f"cannot create the streambed ledger tables: {error}") from error


def now() -> dt.datetime:
    """The current time in UTC, as every time in the ledger is stored."""
    return dt.datetime.now(dt.UTC)


def as_utc(value: dt.datetime) -> dt.datetime:
    """A time read back from the ledger, in UTC (SQLite returns naive datetimes)."""
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)
