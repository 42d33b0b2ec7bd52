"""pyiceberg's ``SqlCatalog`` pointer rows, as publish/iceberg/pointers.py relies on them."""

from __future__ import annotations

import pytest
from pyiceberg.catalog.sql import IcebergTables, SqlCatalog
from pyiceberg.serializers import ToOutputFile
from pyiceberg.table import Table
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from airflow_provider_streambed.publish.iceberg.metastore import stage_table
from airflow_provider_streambed.publish.iceberg.pointers import (
    PointerSwap,
    current_pointers,
    insert_pointer,
    swap_pointers_if_unmoved,
)
from tests.unit.publish.iceberg.conftest import ROWS


def test_current_pointers_are_the_metadata_pyiceberg_loads(catalog: SqlCatalog, table: Table) -> None:
    # IcebergTables: the catalog's rows
    other = catalog.create_table("ns.u", schema=ROWS.schema)
    expected = {"t": table.metadata_location, "u": other.metadata_location}
    assert current_pointers(catalog, "ns", ["t", "u", "absent"]) == expected
    with catalog.engine.connect() as connection:
        assert current_pointers(catalog, "ns", ["t", "u"], connection) == expected
    table.append(ROWS)  # pyiceberg's own commit moves the row
    assert current_pointers(catalog, "ns", ["t"]) == {"t": catalog.load_table("ns.t").metadata_location}


def row_of(catalog: SqlCatalog, name: str) -> dict[str, object]:
    """Table ``ns.<name>``'s row, without its name and metadata location."""
    rows = IcebergTables.__table__
    with catalog.engine.connect() as connection:
        row = connection.execute(select(rows).where(rows.c.table_name == name)).one()._asdict()
    return {column: value for column, value in row.items() if column not in ("table_name", "metadata_location")}


def test_an_inserted_pointer_is_a_table_pyiceberg_loads_and_commits_to(catalog: SqlCatalog) -> None:
    # SqlCatalog._create_table_row: the row of a new table, as pyiceberg writes and reads it
    staged = stage_table(catalog, ("ns", "new"), ROWS.schema)
    ToOutputFile.table_metadata(staged.metadata, staged.io.new_output(staged.metadata_location))
    with catalog.engine.begin() as connection:
        insert_pointer(catalog, connection, ("ns", "new"), staged.metadata_location)
    catalog.create_table("ns.created", schema=ROWS.schema)
    assert row_of(catalog, "new") == row_of(catalog, "created")
    assert ("ns", "new") in catalog.list_tables("ns")
    loaded = catalog.load_table("ns.new")
    assert loaded.metadata_location == staged.metadata_location
    loaded.append(ROWS)
    assert catalog.load_table("ns.new").scan().to_arrow().num_rows == len(ROWS)
    with pytest.raises(IntegrityError), catalog.engine.begin() as connection:
        insert_pointer(catalog, connection, ("ns", "new"), staged.metadata_location)


def test_a_swap_moves_only_pointers_still_at_their_base_and_pyiceberg_commits_on_top(
    catalog: SqlCatalog, table: Table
) -> None:
    # IcebergTables: metadata_location compared and swapped, previous_metadata_location kept
    first = table.metadata_location
    table.append(ROWS)
    second = table.metadata_location
    swaps = [PointerSwap(("ns", "t"), second, first), PointerSwap(("ns", "t"), "a moved base", second)]
    with catalog.engine.begin() as connection:
        assert swap_pointers_if_unmoved(catalog, connection, swaps) == 1
    loaded = catalog.load_table("ns.t")
    assert loaded.metadata_location == first and loaded.scan().to_arrow().num_rows == len(ROWS)
    loaded.append(ROWS)  # pyiceberg's compare-and-swap starts from the swapped row
    assert catalog.load_table("ns.t").scan().to_arrow().num_rows == 2 * len(ROWS)
