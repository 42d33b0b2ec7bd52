"""Reading a mirror's files as its columns at W, whatever schema each file was written under.

A mirror's schema evolves in place (DESIGN §15): a column dropped, renamed, added or widened
changes the Iceberg schema by field id, and the files written before stay as they are. A
snapshot's files, and a run's changelog segments, may then hold a column under an older name or
an older (narrower) type, lack a column added since, or hold one dropped since. The merges and
Spark's snapshot reads take each column under its own name or the first of its older names that a
file holds (:attr:`FileColumns.aliases`, from the table's name mapping and the capture's renames),
read it as its type at W, read a column no file holds as null, and ignore the others. A file
never holds two names of one column: a name that moves to another column (a dropped column's
name taken again) makes the capture copy the member again instead.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from airflow_provider_streambed import storage
from airflow_provider_streambed.staging.capture_manifest import TableCapture
from airflow_provider_streambed.staging.changelog import TOAST_MARKER_PREFIX


@dataclass(frozen=True, slots=True)
class FileColumns:
    """A mirror's columns at W, and the names its older files may hold them under.

    Attributes:
        schema: the columns at W, in source order, with the Arrow types the changelog holds.
        aliases: each column's older names, by its name at W (columns without any are left out).
        changelog: the changelog's own columns at W, after ``schema``'s (bookkeeping and
            unchanged-TOAST markers; empty when not read from a capture).
    """

    schema: pa.Schema
    aliases: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    changelog: pa.Schema = field(default_factory=lambda: pa.schema([]))

    @classmethod
    def of(cls, capture: TableCapture) -> FileColumns:
        """The columns of a run's capture: the last changelog segment's (it is written with the
        table's columns at W) and the capture's older names of them."""
        filesystem, path = storage.filesystem(capture.files[-1])
        with filesystem.open_input_file(path) as stream:
            segment = pq.read_schema(stream)
        return cls(pa.schema([segment.field(name) for name in capture.columns]), dict(capture.aliases),
                   pa.schema([field for field in segment if field.name not in capture.columns]))

    @property
    def names(self) -> list[str]:
        """The column names at W."""
        return list(self.schema.names)

    def names_of(self, name: str) -> tuple[str, ...]:
        """Every name a file may hold column ``name`` under, its own first; an unchanged-TOAST
        marker's (``_toast_<column>``) follow its column's."""
        if name.startswith(TOAST_MARKER_PREFIX):
            column = name.removeprefix(TOAST_MARKER_PREFIX)
            return (name, *(TOAST_MARKER_PREFIX + other for other in self.aliases.get(column, ())))
        return (name, *self.aliases.get(name, ()))

    def held(self, name: str, present: Collection[str]) -> list[str]:
        """Of column ``name``'s names, those among a file's ``present`` columns, its own first."""
        return [other for other in self.names_of(name) if other in present]

    def conform(self, table: pa.Table, extra: Mapping[str, pa.DataType] | None = None) -> pa.Table:
        """``table`` (one file's rows) as the columns at W, then the ``extra`` columns (name ->
        type: bookkeeping and marker columns), each under the first of its names the file holds,
        cast to its type; null where the file holds none."""
        targets = [*self.schema, *(pa.field(name, kind) for name, kind in (extra or {}).items())]
        arrays = []
        for target in targets:
            held = self.held(target.name, table.column_names)
            column = table[held[0]] if held else pa.nulls(len(table), target.type)
            arrays.append(column if column.type == target.type else pc.cast(column, target.type))
        return pa.Table.from_arrays(arrays, schema=pa.schema(targets))
