"""How a source table's columns changed since a mirror's previous cut in ways the mirror cannot
follow in place (one rule, used when a run is captured and again when it is planned), and which
type changes Iceberg promotes in place."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

import pyarrow as pa


def columns_change(
    columns: Sequence[str], filled: Collection[str], previous: Sequence[str], renamed: Mapping[str, str]
) -> str:
    """Why a mirror with ``previous`` columns cannot follow its table's ``columns`` in place
    (empty: it can): columns added with a ``DEFAULT`` that the older rows read from the source's
    catalog (``filled``), which no change record carries. Dropped and ``renamed`` columns (old
    name -> new) evolve in place."""
    earlier = {new: old for old, new in renamed.items()}
    defaulted = [name for name in columns if earlier.get(name, name) not in previous and name in filled]
    if defaulted:
        return (f"columns {defaulted} were added with a DEFAULT, which the rows from before the ALTER TABLE read "
                "from the source's catalog and no change carries")
    return ""


def types_change(columns: Sequence[tuple[str, pa.DataType]], previous: pa.Schema, renamed: Mapping[str, str]) -> str:
    """Which of ``columns`` (name, Arrow type as captured) a mirror with ``previous`` (its columns
    under their names then: ``renamed`` maps old names to new) has under an Iceberg type that
    cannot be promoted to the new one (empty: none)."""
    earlier = {new: old for old, new in renamed.items()}
    retyped = [
        f"{name} {iceberg_type(previous.field(old).type)} -> {iceberg_type(arrow_type)}"
        for name, arrow_type in columns
        if (old := earlier.get(name, name)) in previous.names and not promotable(previous.field(old).type, arrow_type)
    ]
    return f"columns changed type: {', '.join(retyped)}" if retyped else ""


def iceberg_type(arrow_type: pa.DataType) -> str:
    """The Iceberg type an Arrow column type is stored as (Iceberg has one integer type below
    ``long``, one string and one binary type)."""
    if pa.types.is_integer(arrow_type):
        return "long" if arrow_type.bit_width == 64 else "int"
    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        return "string"
    if pa.types.is_binary(arrow_type) or pa.types.is_large_binary(arrow_type):
        return "binary"
    if pa.types.is_timestamp(arrow_type):
        return "timestamptz" if arrow_type.tz else "timestamp"
    if pa.types.is_floating(arrow_type):
        return "float" if arrow_type.bit_width == 32 else "double"
    return str(arrow_type)


def promotable(old: pa.DataType, new: pa.DataType) -> bool:
    """Whether Iceberg reads a column of type ``old`` as ``new`` keeping its field id (the same
    Iceberg type, int to long, float to double, a decimal's precision raised at the same scale)."""
    old_type, new_type = iceberg_type(old), iceberg_type(new)
    if old_type == new_type or (old_type, new_type) in {("int", "long"), ("float", "double")}:
        return True
    return (pa.types.is_decimal(old) and pa.types.is_decimal(new) and old.scale == new.scale
            and old.precision <= new.precision)
