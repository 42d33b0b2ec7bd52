"""Evolving a member table's schema to its staged output's: columns renamed, new columns, promoted
types, and the columns it no longer has dropped (by field id: no data file is rewritten, older
snapshots keep reading them). A mirror's output, whole or merged on read, has every column of its
source table at W; a derived member's has every column of its result."""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa
from pyiceberg.exceptions import ResolveError, ValidationError
from pyiceberg.schema import Schema
from pyiceberg.table import Transaction

from airflow_provider_streambed.exceptions import OutputSchemaError
from airflow_provider_streambed.publish.iceberg.transaction import transaction_table
from airflow_provider_streambed.staging.column_changes import promotable
from airflow_provider_streambed.staging.members import parquet_type


def same_schema(schema: Schema, arrow_schema: pa.Schema) -> bool:
    """Whether a staged output's Arrow schema is the table's schema (no update needed): the same
    columns in order, of the same types and nullability. pyiceberg gives large strings and
    binaries where Parquet files hold plain ones; Iceberg does not tell them apart. A nested
    type compares as is (a mismatch only costs the schema update's dry run)."""

    def shape(of: pa.Schema) -> list[tuple[str, pa.DataType, bool]]:
        return [(field.name, parquet_type(field.type), field.nullable) for field in of]

    return shape(schema.as_arrow()) == shape(arrow_schema)


def evolve_schema(
    transaction: Transaction, arrow_schema: pa.Schema, *, retype: bool = False,
    renamed: Mapping[str, str] | None = None,
) -> None:
    """Evolve the table's schema to a staged output's: new columns, promoted types (int to long),
    and the columns the output does not have dropped (the files of older cuts keep them; the
    table's rows no longer read them). With ``retype`` (a resynced mirror: a copy with the
    source's columns as they are now) a column whose type changed in a way Iceberg cannot promote
    is replaced: dropped and added again under a new field id, in the output's column order (older
    snapshots keep reading the old column); a promotable change (int to long, float to double, a
    longer decimal) keeps its field id. ``renamed`` columns (old name -> new) are renamed first,
    keeping their field ids (the table's name mapping keeps both names, so files written under
    either read the column). Stages nothing when the output's schema is the table's (the common
    case: a schema update costs milliseconds per member, a comparison microseconds).

    Raises:
        OutputSchemaError: the output changes a column's type in a way Iceberg does not allow;
            names the member (the table's name), the columns and both types.
    """
    current = transaction.table_metadata.schema().column_names
    if renames := {old: new for old, new in (renamed or {}).items() if old in current and new not in current}:
        with transaction.update_schema() as update:
            for old, new in renames.items():
                update.rename_column(old, new)
    if same_schema(transaction.table_metadata.schema(), arrow_schema):
        return
    if retype:
        _replace_retyped(transaction, arrow_schema)
    try:
        with transaction.update_schema() as update:
            update.union_by_name(arrow_schema)
            for field in transaction.table_metadata.schema().fields:
                if field.name not in arrow_schema.names:
                    update.delete_column(field.name)
    except (ResolveError, ValidationError, ValueError) as error:
        current = transaction.table_metadata.schema().as_arrow()
        changed = [
            f"{field.name} {current.field(field.name).type} -> {field.type}" for field in arrow_schema
            if field.name in current.names and parquet_type(current.field(field.name).type) != parquet_type(field.type)
        ]
        identifier = transaction_table(transaction).name()
        raise OutputSchemaError(
            f"member {identifier[-1]!r}: its output does not fit table {'.'.join(identifier)}: "
            f"{', '.join(changed) or error} (Iceberg only widens a column: int to long, float to double, a "
            "longer decimal); fix the member, or drop its table to start it anew", identifier[-1],
        ) from error


def _replace_retyped(transaction: Transaction, arrow_schema: pa.Schema) -> None:
    """Drop the columns whose type the output changes and add them back with the output's types,
    in the output's column order (three schema updates: pyiceberg does not delete and add one
    name in a single update)."""
    current = transaction.table_metadata.schema().as_arrow()
    retyped = [field.name for field in arrow_schema if field.name in current.names
               and not promotable(parquet_type(current.field(field.name).type), parquet_type(field.type))]
    if not retyped:
        return
    with transaction.update_schema() as update:
        for name in retyped:
            update.delete_column(name)
    with transaction.update_schema() as update:
        update.union_by_name(arrow_schema)
    with transaction.update_schema() as update:
        update.move_first(arrow_schema.names[0])
        for before, name in zip(arrow_schema.names, arrow_schema.names[1:], strict=False):
            update.move_after(name, before)
