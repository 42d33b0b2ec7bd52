"""Column type OIDs resolved to :class:`~.typemap.PgType` through the source's catalog (domains, enums, arrays).

The mapping itself is pure (:mod:`.typemap`); this module asks ``pg_type`` about the OIDs a
table's columns or a pgoutput Relation message name, and refuses the types the mapping cannot
carry, naming the column.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import psycopg

from airflow_provider_streambed.capture.typemap import NATIVE, NUMERIC, TEXT, TEXT_FORM, PgType, decimal_type
from airflow_provider_streambed.exceptions import UnsupportedTypeError

_TYPE_QUERY = """
SELECT t.oid::int8, format_type(t.oid, NULL), t.typtype::text, t.typbasetype::int8, t.typtypmod, t.typlen,
       t.typcategory::text, t.typelem::int8, t.typoutput::regproc::text
FROM pg_type t WHERE t.oid = ANY(%s)
"""


#: ``typtype`` of a type no longer in the catalog (decoding a WAL range from before its ``DROP TYPE``).
_DROPPED = "?"


@dataclass(frozen=True, slots=True)
class _Row:
    name: str
    kind: str
    base: int
    base_modifier: int
    length: int
    category: str
    element: int
    output: str


class TypeResolver:
    """Resolves column type OIDs to :class:`PgType` through the source's catalog, with a cache.

    Args:
        conn: a connection to the source database (used only for OIDs not seen before).
    """

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn
        self._rows: dict[int, _Row] = {}

    def column_types(self, where: str, columns: Iterable[tuple[str, int, int]]) -> tuple[PgType, ...]:
        """The types of ``(name, type OID, type modifier)`` columns.

        Raises:
            UnsupportedTypeError: a column's type is not carried; names ``where``, the column and type.
        """
        columns = list(columns)
        self._load({oid for _, oid, _ in columns})
        types = []
        for name, oid, modifier in columns:
            resolved = self._resolve(oid, modifier)
            if resolved is None:
                raise UnsupportedTypeError(
                    f"{where}: column {name!r} has type {self._rows[oid].name!r}, which streambed cannot mirror "
                    "(composite, range and extension types are not supported); cast it to a supported type "
                    "(ALTER TABLE ... ALTER COLUMN ... TYPE text USING ...::text) or drop it, then run again"
                )
            types.append(resolved)
        return tuple(types)

    def _load(self, oids: set[int]) -> None:
        missing = oids - set(self._rows)
        while missing:
            found = self._conn.execute(_TYPE_QUERY, (sorted(missing),)).fetchall()
            for oid, name, kind, base, base_modifier, length, category, element, output in found:
                self._rows[int(oid)] = _Row(name, kind, int(base), int(base_modifier), int(length), category,
                                            int(element), output)
            for oid in missing - set(self._rows):  # dropped since the WAL named it: pgoutput sent its text
                self._rows[oid] = _Row(f"type {oid} (dropped)", _DROPPED, 0, -1, -1, "", 0, "")
            related = {row.base for row in self._rows.values() if row.kind == "d"}
            related |= {row.element for row in self._rows.values() if row.category == "A" and row.element}
            missing = related - set(self._rows)

    def _resolve(self, oid: int, modifier: int) -> PgType | None:
        row = self._rows[oid]
        if row.kind == _DROPPED:
            return PgType(row.name, TEXT, -1, False, True)
        if row.kind == "d":
            base = self._resolve(row.base, row.base_modifier if modifier < 0 else modifier)
            if base is None:
                return None
            return PgType(row.name, base.oid, base.modifier, base.fixed_width, base.text_form, base.output,
                          base.cast or self._rows[row.base].name)
        fixed = row.length > 0
        if row.kind == "e":
            return PgType(row.name, TEXT, -1, fixed, True, row.output)
        if row.category == "A" and row.element:
            element = self._rows[row.element]
            supported = element.kind != "p" and self._resolve(row.element, -1) is not None
            return PgType(row.name, TEXT, -1, fixed, True, row.output) if supported else None
        if oid in NATIVE or oid == NUMERIC:
            return PgType(row.name, oid, modifier, fixed, oid == NUMERIC and decimal_type(modifier) is None, row.output)
        if oid in TEXT_FORM:
            return PgType(row.name, oid, modifier, fixed, True, row.output)
        return None
