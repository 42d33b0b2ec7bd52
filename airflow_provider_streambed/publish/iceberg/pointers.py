"""The SQL catalog's pointer rows: each table's current metadata location, read and moved in a
transaction of the catalog database the caller controls.

pyiceberg's ``SqlCatalog.commit_table`` moves one table's pointer per transaction; a cut moves
all of its members' at once, with the ledger's rows, so it writes the ``iceberg_tables`` rows
itself (Iceberg's JDBC catalog layout). Relies on pyiceberg 0.12's ORM model of that table
(``pyiceberg.catalog.sql.IcebergTables``) and ``SqlCatalog._create_table_row`` (the row of a new
table, with the columns of the catalog's schema version); ``tests/unit/publish/iceberg/test_pointers.py``
checks them against the installed pyiceberg.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple, cast

from pyiceberg.catalog.sql import IcebergTables, SqlCatalog
from sqlalchemy import Connection, Table, bindparam, insert, select, update


class PointerSwap(NamedTuple):
    """One table's pointer move: from the metadata file ``base`` to ``new``."""

    identifier: tuple[str, str]
    base: str
    new: str


def _rows() -> Table:
    return cast(Table, IcebergTables.__table__)


def current_pointers(
    catalog: SqlCatalog, namespace: str, names: Iterable[str], connection: Connection | None = None
) -> dict[str, str]:
    """The current metadata location of each existing table ``namespace.<name>``, in one query
    (inside ``connection``'s transaction when given)."""
    rows = _rows()
    query = select(rows.c.table_name, rows.c.metadata_location).where(
        rows.c.catalog_name == catalog.name,
        rows.c.table_namespace == namespace,
        rows.c.table_name.in_(list(names)),
    )
    if connection is not None:
        return {row.table_name: row.metadata_location for row in connection.execute(query)}
    with catalog.engine.connect() as own:
        return {row.table_name: row.metadata_location for row in own.execute(query)}


def insert_pointer(catalog: SqlCatalog, connection: Connection, identifier: tuple[str, str], location: str) -> None:
    """Create table ``identifier`` in the catalog, pointing at the metadata file ``location``.

    Raises:
        sqlalchemy.exc.IntegrityError: the catalog has the table already.
    """
    namespace, name = identifier
    connection.execute(insert(_rows()).values(**catalog._create_table_row(namespace, name, location)))


def swap_pointers_if_unmoved(catalog: SqlCatalog, connection: Connection, swaps: Sequence[PointerSwap]) -> int:
    """Move each pointer still at its ``base`` to ``new`` (compare-and-swap), as one batch: one
    compiled statement, one driver call, in the order given. Returns how many pointers moved."""
    rows = _rows()
    statement = (
        update(rows)
        .where(
            rows.c.catalog_name == catalog.name,
            rows.c.table_namespace == bindparam("namespace"),
            rows.c.table_name == bindparam("name"),
            rows.c.metadata_location == bindparam("base"),
        )
        .values(metadata_location=bindparam("new"), previous_metadata_location=bindparam("base"))
    )
    batch = [
        {"namespace": namespace, "name": name, "base": swap.base, "new": swap.new}
        for swap in swaps
        for namespace, name in [swap.identifier]
    ]
    return int(connection.execute(statement, batch).rowcount)
