"""Members computed and staged in the refresh task's process (the Airflow worker), before any Spark application.

Mirrors the in-process merge takes (:mod:`.duckdb_merge`), then incremental SQL members whose
sources are staged or carried and whose update the worker computes (:mod:`.duckdb_delta`).
Imports no pyspark: both are DuckDB's.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.member_declarations import Mirror, SqlMember
from airflow_provider_streambed.refresh.derived.duckdb_delta import stage_updated
from airflow_provider_streambed.refresh.derived.sources import source_state
from airflow_provider_streambed.refresh.mirrors.duckdb_merge import merge_in_process
from airflow_provider_streambed.refresh.mirrors.merge_input import mirror_input
from airflow_provider_streambed.refresh.mirrors.merge_output import stage_mirror
from airflow_provider_streambed.refresh.plan.spec import check_spec, read_captures
from airflow_provider_streambed.refresh.plan.work import definition_digest, members_to_compute
from airflow_provider_streambed.staging import JobSpec, TableCapture

logger = logging.getLogger(__name__)


def stage_in_process(spec: JobSpec, members: Sequence[str] = (), settings: Mapping[str, str] | None = None
                     ) -> tuple[str, ...]:
    """Compute and stage here, before any Spark application, each member of the spec (or of
    ``members``) still to compute that this process computes; returns their names.

    First the mirrors the in-process merge takes; then, sources first, the incremental SQL
    members whose sources are staged for W or carried and whose update :mod:`.duckdb_delta`
    computes (``settings``: the refresh's Spark configuration, for a full refresh). A run whose
    work is all such members then submits no Spark application, and the one it submits skips
    them (their output is staged for W). A member this process does not take, or that fails here
    (logged), is left to the application, which reports its error.
    """
    group = RefreshGroup.from_dict(spec.group)
    check_spec(spec, group)
    captures = read_captures(spec, group)
    pending = {name.lower() for name in members_to_compute(spec)}  # no output fit for W staged (yet)
    wanted = {name.lower() for name in members}
    requested = [member for member in group.topological_members()
                 if member.name.lower() in pending and (not wanted or member.name.lower() in wanted)]
    staged = []
    for member in requested:
        capture = captures.get(member.name.lower())
        if not isinstance(member, Mirror) or capture is None:
            continue
        try:
            source = mirror_input(spec, group, member, capture)
            if (output := merge_in_process(source)) is not None:
                stage_mirror(spec, source, output, definition_digest(member))
                staged.append(member.name)
                pending.discard(member.name.lower())
        except Exception:  # whatever it is, the Spark application computes the member again and reports
            logger.warning("group=%s member=%s W=%s: the in-process merge failed; Spark merges it", group.name,
                           member.name, spec.watermark, exc_info=True)
    for member in requested:
        if not (isinstance(member, SqlMember) and member.incremental):
            continue
        if any(group.member(source).name.lower() in pending for source in member.sources):
            continue  # a source still to compute (or to compute again): so is the member
        if _updated_here(spec, group, member, captures, settings or {}):
            staged.append(member.name)
            pending.discard(member.name.lower())
    return tuple(staged)


def _updated_here(spec: JobSpec, group: RefreshGroup, member: SqlMember, captures: dict[str, TableCapture],
                  settings: Mapping[str, str]) -> bool:
    """Whether SQL member ``member``, whose sources are each carried or staged for W, was updated
    and staged here."""
    try:
        sources = {name: source_state(spec, group, member, name, {}, captures) for name in member.sources}
        return stage_updated(settings, spec, member, sources, definition_digest(member)) is not None
    except Exception:  # whatever it is, the Spark application computes the member again and reports
        logger.warning("group=%s member=%s W=%s: the update in this process failed; Spark computes it", group.name,
                       member.name, spec.watermark, exc_info=True)
        return False
