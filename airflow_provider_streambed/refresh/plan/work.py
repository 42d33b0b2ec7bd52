"""Which members a run must compute, which carry their previous snapshot into the new cut, and which are left.

Work follows the changelog (DESIGN section 9). A mirror whose source table has no change in
``[W_prev, W)`` keeps its previous snapshot; so does a derived member none of whose sources is
recomputed (transitively). A member is always computed on its first cut, after a bootstrap copy,
when its table's columns changed, and when its definition changed since its snapshot was made
(the digest of the declaration is stored with every snapshot). A run in which every member
carries submits no Spark application and still publishes a cut at its new W.

No Spark, no catalog: :func:`~airflow_provider_streambed.refresh.plan.build.build_job_spec` reads what
the previous cut knows and passes it in, and :func:`members_to_compute` reads only the run's
staged manifests (what an earlier try, a copy adopted as is or the in-process merge staged).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.member_declarations import Member, Mirror, member_fields
from airflow_provider_streambed.staging import JobSpec, MemberManifest, TableCapture
from airflow_provider_streambed.staging.member_manifest import CARRIED
from airflow_provider_streambed.staging.members import staged_manifest

#: Declaration fields that tune how a member is stored or computed, not what its rows are: not in
#: the digest (an incremental member's rows are those of a whole recompute).
STORAGE_FIELDS = frozenset({"compact_deleted_ratio", "compact_max_files", "incremental"})


def definition_digest(member: Member) -> str:
    """A short digest of a member's declaration (kind and the fields that decide its rows)."""
    fields = {name: value for name, value in member_fields(member).items() if name not in STORAGE_FIELDS}
    text = json.dumps(fields, sort_keys=True, default=list)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class PreviousMember:
    """What the previous cut knows of a member's snapshot.

    Attributes:
        definition: the definition digest stored with the snapshot (``None``: made before digests).
        columns: the snapshot's column names.
    """

    definition: str | None
    columns: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class MemberWork:
    """Whether a member is computed in this run, and why (logged by the refresh step).

    ``on_previous``: a derived member computed only because its sources changed, whose previous
    snapshot was made from its current definition: an incremental member may update that snapshot.
    """

    member: str
    compute: bool
    reason: str
    on_previous: bool = False


def plan_work(
    group: RefreshGroup, captures: Mapping[str, TableCapture], previous: Mapping[str, PreviousMember]
) -> dict[str, MemberWork]:
    """Decide per member, in dependency order, whether the run computes it or carries it.

    Args:
        group: the group.
        captures: the run's capture per mirror name.
        previous: per member in the previous cut, what its snapshot was made from (empty on the
            group's first cut).

    Returns:
        Per member name, in dependency order, its :class:`MemberWork`.
    """
    work: dict[str, MemberWork] = {}
    for member in group.topological_members():
        reason = _compute_reason(member, captures.get(member.name), previous.get(member.name), work)
        if reason is not None:
            on_previous = not isinstance(member, Mirror) and _whole_reason(member, previous.get(member.name)) is None
            work[member.name] = MemberWork(member.name, True, reason, on_previous)
        elif isinstance(member, Mirror):
            work[member.name] = MemberWork(member.name, False, f"no change to {member.qualified_table}")
        else:
            work[member.name] = MemberWork(member.name, False, f"sources {', '.join(member.sources)} unchanged")
    return work


def _compute_reason(
    member: Member, capture: TableCapture | None, previous: PreviousMember | None, work: Mapping[str, MemberWork]
) -> str | None:
    """Why ``member`` must be computed, or ``None`` when it can carry its previous snapshot."""
    if (whole := _whole_reason(member, previous)) is not None or previous is None:
        return whole
    if isinstance(member, Mirror):
        if capture is None or capture.bootstrap:
            return "bootstrap copy"
        if capture.changes:
            return f"{capture.changes} changes in the changelog"
        if capture.reshaped or set(capture.columns) != set(previous.columns):
            return "the source table's columns changed"
        return None
    recomputed = {name.lower() for name, planned in work.items() if planned.compute}
    changed = [source for source in member.sources if source.lower() in recomputed]
    return f"sources {', '.join(changed)} recomputed" if changed else None


def _whole_reason(member: Member, previous: PreviousMember | None) -> str | None:
    """Why ``member``'s previous snapshot cannot serve this run (none, or made from another
    definition), or ``None``."""
    if previous is None:
        return "first cut of the member"
    if previous.definition is None:
        return "its snapshot records no definition (made by an older release)"
    if previous.definition != definition_digest(member):
        return "its definition changed"
    return None


def members_to_compute(spec: JobSpec, members: Sequence[str] = ()) -> tuple[str, ...]:
    """The spec's computed members (or ``members`` of them) with no output staged for W that a
    retry may reuse (:func:`fit_manifest`): what a Spark application still has to compute. Empty:
    start none."""
    group = RefreshGroup.from_dict(spec.group)
    wanted = {name.lower() for name in members}
    fits: dict[str, MemberManifest | None] = {}
    return tuple(
        name for name in spec.computed_members()
        if (not wanted or name.lower() in wanted) and fit_manifest(spec, group, group.member(name), fits) is None
    )


def fit_manifest(spec: JobSpec, group: RefreshGroup, member: Member,
                 fits: dict[str, MemberManifest | None] | None = None) -> MemberManifest | None:
    """``member``'s output staged for the spec's W that a retry reuses and its derived members
    read, or ``None`` when there is none: staged from its current declaration, intact, on the
    previous snapshot the spec reads (an incremental output), and, for a derived member, from its
    sources as they are now (:meth:`MemberManifest.computed_from`): a source computed again
    between tries (its declaration edited) leaves every member computed from it to compute again.

    ``fits`` memoizes the answers by member name for one pass over the group (each answer reads
    a manifest and checks its files)."""
    if fits is not None and member.name in fits:
        return fits[member.name]
    found = staged_manifest(spec.staging_root, member.name, spec.watermark, definition_digest(member))
    if found is not None and (not spec.fits(found) or not _computed_from_sources(spec, group, member, found, fits)):
        found = None
    if fits is not None:
        fits[member.name] = found
    return found


def _computed_from_sources(spec: JobSpec, group: RefreshGroup, member: Member, found: MemberManifest,
                           fits: dict[str, MemberManifest | None] | None) -> bool:
    """Whether ``found`` (a derived member's staged output) was computed from its sources as they
    are for this spec: carried over, or each one's reusable staged output."""
    if not found.inputs:  # a mirror, or an output staged by an older release
        return True
    carried = {name.lower() for name in spec.carried}
    sources: dict[str, str] = {}
    for name in member.sources:
        source = group.member(name)
        if source.name.lower() in carried:
            sources[name] = CARRIED
        elif (staged := fit_manifest(spec, group, source, fits)) is not None:
            sources[name] = staged.written_at
        else:
            return False
    return found.computed_from(sources)
