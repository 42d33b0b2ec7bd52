"""Mirrors merged and staged in the refresh task's process (the Airflow worker), before any Spark application.

Imports no pyspark: the in-process merge is :mod:`.mirror_local`'s (DuckDB).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.member_declarations import Mirror
from airflow_provider_streambed.refresh.mirror_input import mirror_input
from airflow_provider_streambed.refresh.mirror_local import merge_in_process
from airflow_provider_streambed.refresh.mirror_output import stage_mirror
from airflow_provider_streambed.refresh.spec import check_spec, read_captures
from airflow_provider_streambed.refresh.work import definition_digest, members_to_compute
from airflow_provider_streambed.staging import JobSpec

logger = logging.getLogger(__name__)


def stage_in_process(spec: JobSpec, members: Sequence[str] = ()) -> tuple[str, ...]:
    """Merge and stage here, before any Spark application, each mirror of the spec (or of
    ``members``) still to compute that the in-process merge takes; returns their names.

    A run whose work is all such mirrors then submits no Spark application, and the one it
    submits skips them (their output is staged for W). A mirror the in-process merge does not
    take, or that fails here (logged), is left to the application, which reports its error.
    """
    group = RefreshGroup.from_dict(spec.group)
    check_spec(spec, group)
    captures = read_captures(spec, group)
    staged = []
    for name in members_to_compute(spec, members):
        member = group.member(name)
        capture = captures.get(member.name.lower())
        if not isinstance(member, Mirror) or capture is None:
            continue
        try:
            source = mirror_input(spec, group, member, capture)
            if (output := merge_in_process(source)) is not None:
                stage_mirror(spec, source, output, definition_digest(member))
                staged.append(member.name)
        except Exception:  # whatever it is, the Spark application computes the member again and reports
            logger.warning("group=%s member=%s W=%s: the in-process merge failed; Spark merges it", group.name,
                           member.name, spec.watermark, exc_info=True)
    return tuple(staged)
