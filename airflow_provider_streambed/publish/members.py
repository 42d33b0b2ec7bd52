"""The records of one member in a cut: its table before the cut, its moved files, its built snapshot."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pyiceberg.table import Table

from airflow_provider_streambed.ledger import CutMember


@dataclass(frozen=True, slots=True)
class MemberPlan:
    """One member's table before the cut, and where its next metadata file goes.

    Attributes:
        member: member name.
        identifier: ``(namespace, table)``.
        table: the current table, or a staged new table on first use.
        base_location: the current metadata location (``None``: the table does not exist yet).
        new_location: where the new metadata file is written (the group commit points there);
            empty for a REST catalog, whose server writes it.
    """

    member: str
    identifier: tuple[str, str]
    table: Table
    base_location: str | None
    new_location: str

    @property
    def table_name(self) -> str:
        """``namespace.table``."""
        return ".".join(self.identifier)


@dataclass(frozen=True, slots=True)
class BuiltMember:
    """A member's next snapshot, written to a metadata file that the commit makes current.

    Attributes:
        plan: the member's plan.
        snapshot_id: the cut's snapshot of the member table.
        metadata_location: the metadata file holding it.
    """

    plan: MemberPlan
    snapshot_id: int
    metadata_location: str

    def cut_member(self) -> CutMember:
        """The ledger's row for this member in the cut."""
        return CutMember(self.plan.member, self.plan.table_name, self.snapshot_id, self.metadata_location)


@dataclass(frozen=True, slots=True)
class MemberFiles:
    """A member's files for one cut, moved into its table.

    Attributes:
        data: Parquet data files: the member's whole table, or (``incremental``) added to its
            previous snapshot.
        deletes: position-delete files over the previous snapshot's data files (``incremental``).
        incremental: whether the files apply on top of the previous snapshot (a :class:`~.iceberg.snapshot.RowDelta`).
        retype: the files are a resynced mirror's copy: a column whose type changed is replaced.
        renamed: a resynced mirror's columns renamed since the last cut (old name -> new).
    """

    data: tuple[str, ...]
    deletes: tuple[str, ...] = ()
    incremental: bool = False
    retype: bool = False
    renamed: Mapping[str, str] = field(default_factory=dict)
