"""What a commit removes from each member table when cuts expire, and staging that removal.

An :class:`ExpiryPlan` lists, per member table, the expiring cuts' tags and the snapshots no kept
cut uses (which cuts expire is the retention's policy, :mod:`airflow_provider_streambed.retention`,
handed to a publish as an :data:`ExpiryPlanner`);
:func:`stage_retention` stages their removal on a pyiceberg ``Transaction`` (a snapshot that a
remaining tag or branch still names is never removed), and bounds the table's metadata log
(``write.metadata.previous-versions-max``) when the table sets none.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field

from pyiceberg.table import TableProperties, Transaction
from pyiceberg.table.update.snapshot import ExpireSnapshots, ManageSnapshots


@dataclass(frozen=True, slots=True)
class TableExpiry:
    """What expiring cuts removes from one member table.

    Attributes:
        tags: the expired cuts' tags.
        snapshot_ids: the expired cuts' snapshots of the table that no kept cut uses.
    """

    tags: tuple[str, ...]
    snapshot_ids: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ExpiryPlan:
    """The cuts of a group that expire in one commit, and per member table what goes.

    Attributes:
        group: the group name.
        cut_ids: the expiring cuts.
        tables: per table identifier (``namespace.table``), its :class:`TableExpiry`.
        previous_versions: the metadata log length for tables that set none (``None``: no retention).
    """

    group: str
    cut_ids: tuple[int, ...] = ()
    tables: Mapping[str, TableExpiry] = field(default_factory=dict)
    previous_versions: int | None = None

    def __bool__(self) -> bool:
        return bool(self.cut_ids)


#: Plans what a publish commit expires, given its member tables' identifiers (``namespace.table``):
#: only cuts whose tables are all among them may expire in it. The retention policy provides it
#: (:func:`airflow_provider_streambed.retention.plan.publish_expiry`); publish calls it inside each
#: attempt, so an attempt that lost to a pin plans again.
ExpiryPlanner = Callable[[Collection[str]], ExpiryPlan]


def stage_retention(transaction: Transaction, table: str, plan: ExpiryPlan) -> None:
    """Stage on ``transaction`` (of table ``namespace.table``) what ``plan`` removes from it, and
    the metadata log bound when the table sets none."""
    if (expiry := plan.tables.get(table)) is not None:
        stage_expiry(transaction, expiry)
    properties = transaction.table_metadata.properties
    if plan.previous_versions is not None and TableProperties.METADATA_PREVIOUS_VERSIONS_MAX not in properties:
        transaction.set_properties({TableProperties.METADATA_PREVIOUS_VERSIONS_MAX: str(plan.previous_versions)})


def stage_expiry(transaction: Transaction, expiry: TableExpiry) -> None:
    """Stage on ``transaction`` the removal of the expired tags, then of the snapshots no ref names.

    Tags and snapshots already gone are skipped, so a plan applies to any later state of the table.
    """
    refs = transaction.table_metadata.refs
    tags = [tag for tag in expiry.tags if tag in refs]
    if tags:
        with ManageSnapshots(transaction) as manage:
            for tag in tags:
                manage.remove_tag(tag)
    metadata = transaction.table_metadata
    named = {ref.snapshot_id for ref in metadata.refs.values()}
    removable = [snapshot for snapshot in expiry.snapshot_ids
                 if snapshot not in named and metadata.snapshot_by_id(snapshot) is not None]
    if removable:
        with ExpireSnapshots(transaction) as expire:
            expire.by_ids(removable)
