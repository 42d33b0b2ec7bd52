"""The ledger's tables in the catalog database, and creating them.

Four tables, written with SQLAlchemy Core so the same code serves SQLite and PostgreSQL:

- ``streambed_runs``: one row per ``(group, run key)`` with the pinned watermark ``W`` and the
  run's state. Written before any other work of a run, so a retried or cleared task finds it.
- ``streambed_cuts``: one row per published cut, numbered 1, 2, 3, ... per group, with unique
  ``(group, run key)`` and ``(group, watermark)``: two publishers of one run make one cut.
- ``streambed_cut_members``: per cut and member, the Iceberg table, snapshot id and metadata
  location that make up the cut.
- ``streambed_expired_cuts``: one small row per cut that expired under the group's retention
  (its rows above are deleted), so a reader asking for it learns when it expired.

LSNs are stored as integers (ordered) and rendered with :class:`~airflow_provider_streambed.lsn.Lsn`.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    DateTime,
    Engine,
    Float,
    ForeignKeyConstraint,
    MetaData,
    Numeric,
    PrimaryKeyConstraint,
    String,
    Table,
    UniqueConstraint,
    inspect,
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
    # Added after the first release: nullable, so create_tables can add them to an older ledger.
    Column("cut_id", BigInteger, nullable=True),  # the cut it published, or found current (unchanged)
    Column("last_error", String(200), nullable=True),  # class of the run's last failure
    Column("replaced_by", String(200), nullable=True),  # the run that superseded or took over from it
    Column("dag_id", String(250), nullable=True),  # the Airflow DAG run, when Airflow runs it
    Column("dag_run_id", String(250), nullable=True),
    # The visibility report at pin time (capture/holdback.py); NULL when the probe failed.
    Column("holdback_count", BigInteger, nullable=True),
    Column("holdback_oldest_seconds", Float, nullable=True),
    # When the newest transaction the run's capture kept committed (its freshness); NULL: none kept.
    Column("newest_commit_at", DateTime(timezone=True), nullable=True),
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
    Column("pinned_at", DateTime(timezone=True), nullable=True),  # pinned cuts never expire
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

expired_cuts_table = Table(
    "streambed_expired_cuts",
    metadata,
    Column("group_name", String(64), nullable=False),
    Column("cut_id", BigInteger, nullable=False),
    Column("watermark", LSN_TYPE, nullable=False),
    Column("run_key", String(200), nullable=False),
    Column("published_at", DateTime(timezone=True), nullable=False),
    Column("expired_at", DateTime(timezone=True), nullable=False),
    PrimaryKeyConstraint("group_name", "cut_id"),
)


def create_tables(engine: Engine) -> None:
    """Create the ledger tables if they are missing; safe to call concurrently.

    Raises:
        LedgerError: the tables cannot be created.
    """
    for attempt in range(3):
        try:
            metadata.create_all(engine, checkfirst=True)
            with engine.begin() as connection:
                add_missing_columns(connection)
            return
        except (IntegrityError, ProgrammingError, OperationalError) as error:
            # Another process created the same table or column between our check and our DDL.
            if attempt == 2:
                raise LedgerError(f"cannot create the streambed ledger tables: {error}") from error


def add_missing_columns(connection: Connection) -> list[str]:
    """Add the nullable columns a ledger made by an older release lacks; returns their names.

    New columns of the ledger are always nullable, so ``ALTER TABLE ... ADD COLUMN`` upgrades a
    ledger in place on SQLite and PostgreSQL without rewriting a row.
    """
    added = []
    inspector = inspect(connection)
    for table in metadata.sorted_tables:
        present = {column["name"] for column in inspector.get_columns(table.name)}
        for column in table.columns:
            if column.name in present:
                continue
            if not column.nullable:
                raise LedgerError(f"ledger table {table.name} lacks column {column.name}, which cannot be added")
            kind = column.type.compile(dialect=connection.dialect)
            connection.exec_driver_sql(f'ALTER TABLE {table.name} ADD COLUMN "{column.name}" {kind}')
            added.append(f"{table.name}.{column.name}")
    return added


def now() -> dt.datetime:
    """The current time in UTC, as every time in the ledger is stored."""
    return dt.datetime.now(dt.UTC)


def as_utc(value: dt.datetime) -> dt.datetime:
    """A time read back from the ledger, in UTC (SQLite returns naive datetimes)."""
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)
