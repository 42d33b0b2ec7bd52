"""The cut a run is about to publish, and the checks it passes before any file is written."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from airflow_provider_streambed.cut_order import check_after_last_cut
from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.exceptions import PublishConflictError, PublishError, RunSupersededError
from airflow_provider_streambed.ledger import CutMember, CutRecord, Ledger, RunState
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.publish.members import MemberPlan
from airflow_provider_streambed.snapshot_properties import (
    CUT_ID_PROPERTY,
    DEFINITION_PROPERTY,
    GROUP_PROPERTY,
    RESYNC_PROPERTY,
    RUN_KEY_PROPERTY,
    SHAPE_PROPERTY,
    SOURCE_PROPERTY_PREFIX,
    WATERMARK_PROPERTY,
)
from airflow_provider_streambed.staging import MemberManifest


@dataclass(frozen=True, slots=True)
class CutDraft:
    """The cut a run is about to publish.

    Attributes:
        group: the group.
        run_key: the run.
        watermark: the cut's W.
        cut_id: the number the cut gets.
        last: the group's last cut (``None`` before the first).
        manifests: the staged output of every member the run computed.
        carried: the members that keep their snapshot of the last cut (nothing changed for them).
    """

    group: RefreshGroup
    run_key: str
    watermark: Lsn
    cut_id: int
    last: CutRecord | None
    manifests: Mapping[str, MemberManifest]
    carried: Mapping[str, CutMember]

    @property
    def members(self) -> list[str]:
        """Every member of the cut: computed ones first, then carried ones."""
        return [*self.manifests, *self.carried]

    def snapshot_properties(self, member: str) -> dict[str, str]:
        """The summary properties of a computed member's new snapshot in this cut.

        The definition digest is the one the output was computed from (its manifest's), which a
        declaration edited between refresh and publish does not change.
        """
        properties = {
            GROUP_PROPERTY: self.group.name,
            CUT_ID_PROPERTY: str(self.cut_id),
            WATERMARK_PROPERTY: str(self.watermark),
            RUN_KEY_PROPERTY: self.run_key,
        }
        if definition := self.manifests[member].definition:
            properties[DEFINITION_PROPERTY] = definition
        if shape := self.manifests[member].shape:
            properties[SHAPE_PROPERTY] = shape
        if resynced := self.manifests[member].resynced:
            properties[RESYNC_PROPERTY] = resynced
        properties.update({SOURCE_PROPERTY_PREFIX + name: value
                           for name, value in self.manifests[member].source.items()})
        return properties


def carried_members(group: str, run_key: str, carried: Collection[str], last: CutRecord | None) -> dict[str, CutMember]:
    """The last cut's snapshot of every carried member.

    Raises:
        PublishError: a carried member has no snapshot in the last cut.
    """
    found = {} if last is None else last.members
    if missing := sorted(name for name in carried if name not in found):
        raise PublishError(
            f"group {group!r}, run {run_key!r}: members {missing} are carried over but the last cut has none of them"
        )
    return {name: found[name] for name in carried}


def run_watermark(
    group: RefreshGroup,
    run_key: str,
    manifests: Mapping[str, MemberManifest],
    carried: Collection[str] = (),
    pinned: Lsn | None = None,
) -> Lsn:
    """The run's W: the one watermark of all manifests (the pinned W when every member is carried).

    The staged and the carried members must together be exactly the group's members.

    Raises:
        PublishError: members are missing or unknown, or the manifests disagree on W.
    """
    names = {member.name for member in group.members}
    covered = set(manifests) | set(carried)
    if missing := sorted(names - covered):
        raise PublishError(f"group {group.name!r}, run {run_key!r}: no staged output for members {missing}")
    if unknown := sorted(covered - names):
        raise PublishError(f"group {group.name!r}, run {run_key!r}: staged output of unknown members {unknown}")
    watermarks = {manifest.watermark for manifest in manifests.values()}
    if not watermarks and pinned is not None:
        return pinned
    if len(watermarks) != 1:
        found = {name: str(manifest.watermark) for name, manifest in sorted(manifests.items())}
        raise PublishError(f"group {group.name!r}, run {run_key!r}: members were staged at different W: {found}")
    return watermarks.pop()


def check_unchanged(group: str, plans: Mapping[str, MemberPlan], last: CutRecord | None) -> None:
    """Refuse to publish over a member table that another writer changed since the last cut.

    Raises:
        PublishConflictError: a member table's current snapshot is not the one of the last cut.
    """
    for plan in plans.values():
        previous = None if last is None else last.members.get(plan.member)
        current = plan.table.metadata.current_snapshot_id
        if previous is not None and plan.base_location is not None and current != previous.snapshot_id:
            raise PublishConflictError(
                f"group {group!r}, member {plan.member!r}: table {plan.table_name} is at snapshot {current}, "
                f"not at cut {last.cut_id if last else 0}'s snapshot {previous.snapshot_id}: another writer "
                "changed it; nothing was published"
            )


def check_run(ledger: Ledger, group: str, run_key: str, watermark: Lsn, last: CutRecord | None) -> None:
    """Check the run against the ledger and the group's last cut."""
    run = ledger.get_run(group, run_key)
    if run is not None and run.watermark != watermark:
        raise PublishError(
            f"group {group!r}, run {run_key!r}: staged at W={watermark} but the ledger pinned W={run.watermark}"
        )
    if run is not None and run.state == RunState.SUPERSEDED:
        by = f" by run {run.replaced_by}" if run.replaced_by else ""
        raise RunSupersededError(
            f"group {group!r}, run {run_key!r} (W={watermark}) was superseded{by}; it cannot publish"
        )
    if run is not None and run.state == RunState.UNCHANGED:
        raise PublishError(
            f"group {group!r}, run {run_key!r} (W={watermark}) found nothing new; it has no cut to publish"
        )
    if last is not None:
        check_after_last_cut(group, run_key, watermark, last.watermark, last.cut_id)
