"""The connection side of the ledger: the catalog database's engine and its transactions."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Connection, Engine, create_engine

from airflow_provider_streambed.ledger.schema import create_tables


class LedgerDatabase:
    """The catalog database the ledger lives in; :class:`~airflow_provider_streambed.ledger.Ledger` builds on it.

    Args:
        engine: an SQLAlchemy engine on the catalog database (the one pyiceberg's ``SqlCatalog``
            uses, e.g. ``catalog.engine``), or a database URI (its engine checks a pooled
            connection before use, so a long-lived reader survives a restart of the database).
    """

    def __init__(self, engine: Engine | str) -> None:
        self.engine = create_engine(engine, pool_pre_ping=True) if isinstance(engine, str) else engine

    def create(self) -> None:
        """Create the ledger tables if they are missing; safe to call concurrently."""
        create_tables(self.engine)

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

    @contextmanager
    def connection(self, connection: Connection | None, write: bool = False) -> Iterator[Connection]:
        """``connection`` itself, or a fresh one (committed on exit when ``write``)."""
        if connection is not None:
            yield connection
        elif write:
            with self.engine.begin() as conn:
                yield conn
        else:
            with self.engine.connect() as conn:
                yield conn
