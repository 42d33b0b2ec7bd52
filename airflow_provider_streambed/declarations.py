"""Refresh-group declarations: what users write in DAG files, validated at parse time.

A :class:`RefreshGroup` names a set of output tables (members) that are always published
together, as one transaction-consistent cut of the source database; its members' kinds are
declared in :mod:`~airflow_provider_streambed.member_declarations`. Declarations are frozen
dataclasses holding tuples; every check runs in ``__post_init__`` and raises
:class:`~airflow_provider_streambed.exceptions.DeclarationError` (a ``ValueError``) naming the
group and member at fault.
"""

from __future__ import annotations

import datetime as dt
import graphlib
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from airflow_provider_streambed.exceptions import DeclarationError, MemberNotFoundError
from airflow_provider_streambed.member_declarations import (
    MEMBER_KINDS,
    Member,
    Mirror,
    PythonMember,
    SqlMember,
    check_identifier,
    member_fields,
)

GROUP_NAME = re.compile(r"[a-z_][a-z0-9_]{0,39}")
ATOMICITY = ("group", "per_table")
#: ``on_schema_change``: copy a mirror again when its table changed in a way no change record
#: carries, or fail the run (:mod:`~airflow_provider_streambed.capture.resyncs`).
ON_SCHEMA_CHANGE = ("evolve", "fail")


@dataclass(frozen=True, slots=True)
class CutRetention:
    """How long a group's cuts, their member snapshots and their files are kept.

    A cut expires when it is not among the newest ``keep_last`` cuts, was published more than
    ``keep_newer_than`` ago and is not pinned (``streambed cuts pin``). Expiring a cut removes its
    ledger rows, its tags and the member snapshots no kept cut uses, in one atomic commit; its
    files are deleted once no kept cut, table snapshot or unpublished run needs them and they
    have been unreferenced for ``delete_files_after`` (readers that loaded the cut before it
    expired keep working that long).

    Args:
        keep_last: how many of the newest cuts are always kept (at least 1).
        keep_newer_than: cuts younger than this are kept, however many there are.
        delete_files_after: how long an unreferenced file stays before it is deleted.
    """

    keep_last: int
    keep_newer_than: dt.timedelta = dt.timedelta(days=7)
    delete_files_after: dt.timedelta = dt.timedelta(hours=1)

    def __post_init__(self) -> None:
        if isinstance(self.keep_last, bool) or not isinstance(self.keep_last, int) or self.keep_last < 1:
            raise DeclarationError(f"cut retention: keep_last must be an integer >= 1, got {self.keep_last!r}")
        for name in ("keep_newer_than", "delete_files_after"):
            value = getattr(self, name)
            if not isinstance(value, dt.timedelta) or value < dt.timedelta(0):
                raise DeclarationError(f"cut retention: {name} must be a timedelta >= 0, got {value!r}")

    def to_dict(self) -> dict[str, float]:
        """A JSON-ready form (durations in seconds); :meth:`from_dict` reverses it."""
        return {
            "keep_last": self.keep_last,
            "keep_newer_than_seconds": self.keep_newer_than.total_seconds(),
            "delete_files_after_seconds": self.delete_files_after.total_seconds(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CutRetention:
        """Rebuild a retention from :meth:`to_dict` output, validating it again."""
        return cls(
            keep_last=data["keep_last"],
            keep_newer_than=dt.timedelta(seconds=data["keep_newer_than_seconds"]),
            delete_files_after=dt.timedelta(seconds=data["delete_files_after_seconds"]),
        )


@dataclass(frozen=True, slots=True)
class RefreshGroup:
    """A set of tables refreshed and published together as transaction-consistent cuts.

    Args:
        name: group name: lowercase letters, digits and '_' (it names the replication slot).
        source_conn_id: Airflow connection (type ``postgres``) of the source database.
        catalog_conn_id: Airflow connection of the Iceberg SQL catalog.
        namespace: Iceberg namespace of the member tables.
        members: the members; their dependencies must form a DAG.
        atomicity: ``"group"`` (one atomic commit of all members) or ``"per_table"`` (weaker:
            for catalogs without multi-table commits; readers may see a half-published cut).
        retention: which cuts are kept (:class:`CutRetention`); ``None`` keeps every cut, its
            snapshots and files forever. Needs ``atomicity="group"``.
        on_schema_change: when a mirrored table changed in a way no change record carries (a
            column dropped, renamed, retyped or added with a default): ``"evolve"`` copies that
            member again in the run's cut (a resync of the member; the others keep merging),
            ``"fail"`` fails the run finally, naming the command that resyncs the member.
    """

    name: str
    source_conn_id: str
    catalog_conn_id: str
    namespace: str
    members: tuple[Member, ...] = field(default=())
    atomicity: Literal["group", "per_table"] = "group"
    retention: CutRetention | None = None
    on_schema_change: Literal["evolve", "fail"] = "evolve"

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not GROUP_NAME.fullmatch(self.name):
            raise DeclarationError(
                f"group name {self.name!r} is invalid: use lowercase letters, digits and '_', "
                "not starting with a digit, at most 40 characters"
            )
        for attribute in ("source_conn_id", "catalog_conn_id"):
            value = getattr(self, attribute)
            if not isinstance(value, str) or not value.strip() or value != value.strip():
                raise DeclarationError(f"group {self.name!r}: {attribute} {value!r} must be a non-empty connection id")
        check_identifier(self.namespace, f"group {self.name!r}, namespace")
        if self.atomicity not in ATOMICITY:
            raise DeclarationError(f"group {self.name!r}: atomicity {self.atomicity!r} must be one of {ATOMICITY}")
        if self.on_schema_change not in ON_SCHEMA_CHANGE:
            raise DeclarationError(f"group {self.name!r}: on_schema_change {self.on_schema_change!r} must be one of "
                                   f"{ON_SCHEMA_CHANGE}")
        if self.retention is not None and not isinstance(self.retention, CutRetention):
            raise DeclarationError(f"group {self.name!r}: retention must be a CutRetention, got {self.retention!r}")
        if self.retention is not None and self.atomicity != "group":
            raise DeclarationError(f"group {self.name!r}: retention expires cuts in one atomic commit and needs "
                                   "atomicity='group'")
        if isinstance(self.members, (str, bytes)) or not isinstance(self.members, (list, tuple)):
            raise DeclarationError(f"group {self.name!r}: members must be a list, got {self.members!r}")
        object.__setattr__(self, "members", tuple(self.members))
        self._check_members()
        self.topological_members()

    def _check_members(self) -> None:
        if not self.members:
            raise DeclarationError(f"group {self.name!r} has no members")
        seen: dict[str, Member] = {}
        mirrored: set[str] = set()
        for member in self.members:
            if not isinstance(member, (Mirror, SqlMember, PythonMember)):
                raise DeclarationError(f"group {self.name!r}: {member!r} is not a Mirror, SqlMember or PythonMember")
            key = member.name.lower()
            if key in seen:
                raise DeclarationError(f"group {self.name!r}, member {member.name!r}: duplicate member name")
            seen[key] = member
            if isinstance(member, Mirror):
                if member.qualified_table in mirrored:
                    raise DeclarationError(
                        f"group {self.name!r}, member {member.name!r}: "
                        f"source table {member.qualified_table!r} is mirrored twice"
                    )
                mirrored.add(member.qualified_table)
        for member in self.members:
            for source in member.sources:
                if source.lower() not in seen:
                    raise DeclarationError(f"group {self.name!r}, member {member.name!r}: unknown source {source!r}")

    def topological_members(self) -> tuple[Member, ...]:
        """The members in dependency order, ties broken by declaration order.

        Raises:
            DeclarationError: the dependencies have a cycle; the message lists it.
        """
        graph = {member.name.lower(): {source.lower() for source in member.sources} for member in self.members}
        try:
            tuple(graphlib.TopologicalSorter(graph).static_order())
        except graphlib.CycleError as error:
            cycle = " -> ".join(reversed(error.args[1]))
            raise DeclarationError(f"group {self.name!r}: members depend on each other in a cycle: {cycle}") from error
        done: set[str] = set()
        ordered: list[Member] = []
        while len(ordered) < len(self.members):
            member = next(m for m in self.members if m.name.lower() not in done and graph[m.name.lower()] <= done)
            done.add(member.name.lower())
            ordered.append(member)
        return tuple(ordered)

    @property
    def mirrors(self) -> tuple[Mirror, ...]:
        """The members that mirror source tables."""
        return tuple(member for member in self.members if isinstance(member, Mirror))

    def member(self, name: str) -> Member:
        """The member called ``name`` (case-insensitive).

        Raises:
            MemberNotFoundError: no such member (a ``KeyError``).
        """
        for member in self.members:
            if member.name.lower() == name.lower():
                return member
        raise MemberNotFoundError(f"group {self.name!r} has no member {name!r}")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form, for job specs; :meth:`from_dict` reverses it."""
        members = [member_fields(member) for member in self.members]
        return {
            "name": self.name,
            "source_conn_id": self.source_conn_id,
            "catalog_conn_id": self.catalog_conn_id,
            "namespace": self.namespace,
            "atomicity": self.atomicity,
            "members": members,
            "retention": None if self.retention is None else self.retention.to_dict(),
            "on_schema_change": self.on_schema_change,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RefreshGroup:
        """Rebuild a group from :meth:`to_dict` output, validating it again."""
        members: list[Member] = []
        for raw in data["members"]:
            fields = dict(raw)
            kind = fields.pop("kind")
            if kind not in MEMBER_KINDS:
                raise DeclarationError(f"group {data.get('name')!r}: unknown member kind {kind!r}")
            members.append(MEMBER_KINDS[kind](**fields))
        retention = data.get("retention")
        return cls(**{**data, "members": tuple(members),
                      "retention": None if retention is None else CutRetention.from_dict(retention)})
