"""The members a refresh group declares (mirrors, Spark SQL and PySpark members), validated at parse time.

Each member kind is a frozen dataclass whose ``__post_init__`` raises
:class:`~airflow_provider_streambed.exceptions.DeclarationError` naming the member at fault;
:func:`member_fields` gives a member's JSON form for job specs. The group that holds them is
:class:`~airflow_provider_streambed.declarations.RefreshGroup`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from airflow_provider_streambed.exceptions import DeclarationError

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")
CALLABLE_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*")


def check_identifier(value: object, what: str) -> str:
    """Return ``value`` if it is a quote-safe identifier, else raise naming ``what``.

    Quote-safe means letters, digits and underscores, not starting with a digit, at most 63
    characters (PostgreSQL's limit), so the name is valid unquoted in PostgreSQL, Spark SQL and
    Iceberg and needs no escaping anywhere.
    """
    if not isinstance(value, str) or not IDENTIFIER.fullmatch(value):
        raise DeclarationError(
            f"{what}: {value!r} is not a valid identifier "
            "(use letters, digits and '_', not starting with a digit, at most 63 characters)"
        )
    return value


def _as_names(values: object, what: str) -> tuple[str, ...]:
    if isinstance(values, str) or not isinstance(values, (list, tuple)):
        raise DeclarationError(f"{what}: expected a list of member names, got {values!r}")
    return tuple(check_identifier(value, what) for value in values)


@dataclass(frozen=True, slots=True)
class Mirror:
    """A member that mirrors one source table as of the cut's watermark.

    Args:
        source_table: ``"schema.table"`` or ``"table"`` (schema ``public``).
        name: member (and Iceberg table) name; defaults to the table name.
        append_only: accept a table without primary key or replica identity; only inserts
            are then allowed, and every row is kept.
        compact_deleted_ratio: compaction threshold: the mirror is rewritten whole when its
            position-deleted rows exceed this fraction of its live rows (default 0.1).
        compact_max_files: compaction threshold: ... or when its snapshot has more than this many
            data and delete files (default 64; the mirror tables are unpartitioned).
    """

    source_table: str
    name: str = ""
    append_only: bool = False
    compact_deleted_ratio: float = 0.1
    compact_max_files: int = 64

    def __post_init__(self) -> None:
        parts = self.source_table.split(".") if isinstance(self.source_table, str) else []
        if len(parts) not in (1, 2):
            raise DeclarationError(f"mirror source table {self.source_table!r} must be 'schema.table' or 'table'")
        for part in parts:
            check_identifier(part, f"mirror source table {self.source_table!r}")
        if not self.name:
            object.__setattr__(self, "name", parts[-1])
        check_identifier(self.name, f"mirror of {self.source_table!r}, name")
        if not isinstance(self.compact_deleted_ratio, int | float) or self.compact_deleted_ratio <= 0:
            raise DeclarationError(f"mirror {self.name!r}: compact_deleted_ratio must be > 0, "
                                   f"got {self.compact_deleted_ratio!r}")
        if not isinstance(self.compact_max_files, int) or self.compact_max_files < 1:
            raise DeclarationError(f"mirror {self.name!r}: compact_max_files must be an integer >= 1, "
                                   f"got {self.compact_max_files!r}")

    @property
    def sources(self) -> tuple[str, ...]:
        """Mirrors read the source database, not other members."""
        return ()

    @property
    def schema(self) -> str:
        """The source table's schema."""
        return self.source_table.split(".")[0] if "." in self.source_table else "public"

    @property
    def table(self) -> str:
        """The source table's name without schema."""
        return self.source_table.split(".")[-1]

    @property
    def qualified_table(self) -> str:
        """``schema.table`` with the default schema filled in."""
        return f"{self.schema}.{self.table}"


@dataclass(frozen=True, slots=True)
class SqlMember:
    """A member computed by Spark SQL over other members of the same cut.

    Args:
        name: member (and Iceberg table) name.
        query: a Spark SQL ``SELECT`` whose table names are member names of the group.
        sources: the members the query reads.
        incremental: maintain the member from its previous output when its query is a ``GROUP
            BY`` with ``COUNT``, ``SUM``, ``AVG``, ``MIN`` and ``MAX`` over one source or over
            inner joins of sources on their keys: a run recomputes only the groups its sources'
            changes touched (any other query, or a run that touched most groups, computes it
            whole; the refresh log says why).
    """

    name: str
    query: str
    sources: tuple[str, ...] = ()
    incremental: bool = False

    def __post_init__(self) -> None:
        check_identifier(self.name, "sql member name")
        object.__setattr__(self, "sources", _as_names(self.sources, f"sql member {self.name!r}, sources"))
        if not isinstance(self.query, str) or not self.query.strip():
            raise DeclarationError(f"sql member {self.name!r}: query is empty")
        _check_flag(self.incremental, f"sql member {self.name!r}: incremental")


@dataclass(frozen=True, slots=True)
class PythonMember:
    """A member computed by a PySpark function over other members of the same cut.

    The function is ``fn(spark, inputs: dict[str, DataFrame], cut: CutContext) -> DataFrame``.

    Args:
        name: member (and Iceberg table) name.
        callable_path: ``"package.module:function"``, importable where the Spark driver runs.
        sources: the members whose DataFrames are passed in ``inputs``.
        incremental: the function can update its previous output: on a run where its sources
            changed, ``cut.previous`` holds its output in the previous cut and ``cut.changes``
            its sources' rows removed and added since (``None`` and empty when it must compute
            whole: the first cut, a definition change, a source rewritten whole or reshaped).
    """

    name: str
    callable_path: str
    sources: tuple[str, ...] = ()
    incremental: bool = False

    def __post_init__(self) -> None:
        check_identifier(self.name, "python member name")
        object.__setattr__(self, "sources", _as_names(self.sources, f"python member {self.name!r}, sources"))
        if not isinstance(self.callable_path, str) or not CALLABLE_PATH.fullmatch(self.callable_path):
            raise DeclarationError(
                f"python member {self.name!r}: callable path {self.callable_path!r} "
                "must look like 'package.module:function'"
            )
        _check_flag(self.incremental, f"python member {self.name!r}: incremental")


Member = Mirror | SqlMember | PythonMember
#: The member classes by the kind named in job specs (:func:`member_fields` writes it).
MEMBER_KINDS: dict[str, type[Mirror] | type[SqlMember] | type[PythonMember]] = {
    "mirror": Mirror,
    "sql": SqlMember,
    "python": PythonMember,
}


def incremental_member(member: Member) -> bool:
    """Whether ``member`` may be updated from its previous output and its sources' changes: a
    PythonMember or SqlMember declared ``incremental=True`` (for a SqlMember the refresh job then
    decides from its query's plan)."""
    return isinstance(member, SqlMember | PythonMember) and member.incremental


def _check_flag(value: object, where: str) -> None:
    if not isinstance(value, bool):
        raise DeclarationError(f"{where} must be True or False, got {value!r}")


def member_kind(member: Member) -> str:
    """The member's kind as used in job specs: ``mirror``, ``sql`` or ``python``."""
    return next(kind for kind, cls in MEMBER_KINDS.items() if isinstance(member, cls))


def member_fields(member: Member) -> dict[str, Any]:
    """A member's declaration as JSON-ready fields, with its ``kind`` (``RefreshGroup.from_dict`` reads them)."""
    fields = {slot: getattr(member, slot) for slot in type(member).__slots__}
    if "sources" in fields:
        fields["sources"] = list(fields["sources"])
    return {"kind": member_kind(member), **fields}
