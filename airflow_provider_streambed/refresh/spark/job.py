"""The Spark application of a refresh: computes the requested members of a group as of W.

One application computes all members (one JVM start per run): the mirrors concurrently, then the
derived members in dependency order; passing ``--members`` computes only those (one application
per member). Every member's output is staged
with its manifest written last; members whose output a retry may reuse
(:func:`.work.fit_manifest`: same W and declaration, computed from its sources as they are) are
skipped, so a retry recomputes only what failed or changed. A failing member does not stop
independent members; the application then fails naming every failed member. Imports neither
``capture/`` nor ``publish/``.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from pyspark.sql import SparkSession

from airflow_provider_streambed import storage
from airflow_provider_streambed.compat.spark import SparkLine, check_columns
from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.exceptions import FinalRefreshError, RefreshError, StreambedError, is_final
from airflow_provider_streambed.member_declarations import Member, Mirror, PythonMember, SqlMember
from airflow_provider_streambed.refresh.derived.incremental import incremental_basis
from airflow_provider_streambed.refresh.derived.incremental_sql import stage_sql_member
from airflow_provider_streambed.refresh.derived.members import (
    CutContext,
    Failure,
    collected,
    compute_python_member,
    first_lines,
)
from airflow_provider_streambed.refresh.derived.sources import source_state, staged_inputs
from airflow_provider_streambed.refresh.mirrors.duckdb_merge import IN_PROCESS_MERGE_CONF, merge_in_process
from airflow_provider_streambed.refresh.mirrors.merge_input import MirrorInput, mirror_input
from airflow_provider_streambed.refresh.mirrors.merge_output import LocalMirrorOutput, MirrorOutput, stage_mirror
from airflow_provider_streambed.refresh.mirrors.spark_merge import merge_mirror
from airflow_provider_streambed.refresh.plan.settings import switched_on
from airflow_provider_streambed.refresh.plan.spec import check_spec, read_captures
from airflow_provider_streambed.refresh.plan.work import definition_digest, fit_manifest
from airflow_provider_streambed.refresh.spark.checks import failed_final_check
from airflow_provider_streambed.refresh.spark.object_store import STORE_OPTION, parse_store
from airflow_provider_streambed.refresh.spark.session import build_session, quiet_py4j, share_session, use_object_store
from airflow_provider_streambed.staging import (
    JobSpec,
    MemberManifest,
    TableCapture,
    read_json,
)
from airflow_provider_streambed.staging.file_columns import FileColumns
from airflow_provider_streambed.staging.members import (
    ERROR_MARKER,
    FINAL_ERROR_MARKER,
    stage_member_output,
)

logger = logging.getLogger(__name__)

#: Mirrors are computed concurrently, up to this many at once (their Spark jobs share the
#: application: small merges overlap their latencies); derived members follow one by one.
MIRROR_THREADS = 4


def run_job(spark: SparkSession, spec: JobSpec, members: Sequence[str] = ()) -> dict[str, MemberManifest]:
    """Compute and stage the requested members (``members``, else the spec's), never carried ones.

    Returns:
        The staged manifests of the requested members.

    Raises:
        RefreshError: some members failed; the message names each with its error's first lines.
    """
    group = RefreshGroup.from_dict(spec.group)
    check_spec(spec, group)
    line = SparkLine.of(spark)
    logger.info("group=%s run=%s: %s", group.name, spec.run_key, line.describe())
    if _reads_s3(spec):
        use_object_store(spark, storage.public_properties(storage.configured_properties(spec.staging_root)))
    requested = {name.lower() for name in (members or spec.computed_members())}
    carried = {name.lower() for name in spec.carried}
    ordered = [
        member for member in group.topological_members()
        if member.name.lower() in requested and member.name.lower() not in carried
    ]
    captures = read_captures(spec, group)
    staged: dict[str, MemberManifest] = {}
    failures: dict[str, Failure] = {}
    fits: dict[str, MemberManifest | None] = {}  # fit_manifest's answers, the members staged here included

    def attempt(member: Member) -> None:
        share_session(spark)
        outcome = _attempt(spark, line, spec, group, member, captures, staged, failures, fits)
        if isinstance(outcome, Failure):
            failures[member.name] = outcome
        else:
            staged[member.name] = fits[member.name] = outcome

    mirrors = [member for member in ordered if isinstance(member, Mirror)]
    with ThreadPoolExecutor(max_workers=max(1, min(MIRROR_THREADS, len(mirrors)))) as pool:
        list(pool.map(attempt, mirrors))
    for member in ordered:  # derived members in dependency order: each reads its sources' output
        if not isinstance(member, Mirror):
            attempt(member)
    if failures:
        detail = "; ".join(f"member {name!r}: {failure.message}" for name, failure in failures.items())
        final = any(failure.final for failure in failures.values())
        raise (FinalRefreshError if final else RefreshError)(
            f"group {group.name!r}, run {spec.run_key!r}, W={spec.watermark}: {detail}")
    return staged


def _attempt(
    spark: SparkSession,
    line: SparkLine,
    spec: JobSpec,
    group: RefreshGroup,
    member: Member,
    captures: dict[str, TableCapture],
    staged: dict[str, MemberManifest],
    failures: dict[str, Failure],
    fits: dict[str, MemberManifest | None],
) -> MemberManifest | Failure:
    """The member's manifest (staged now, or by an earlier try when a retry may reuse it:
    :func:`.work.fit_manifest`), or why it failed (its own error's first lines, or its failed
    sources)."""
    existing = fit_manifest(spec, group, member, fits)
    if existing is not None:
        logger.info("group=%s member=%s W=%s: already staged, skipped", group.name, member.name, spec.watermark)
        return existing
    failed_sources = [source for source in member.sources if source in failures]
    if failed_sources:
        return Failure(f"not computed: its sources {failed_sources} failed", False)
    try:
        return _compute(spark, line, spec, group, member, captures, staged)
    except Exception as error:  # a member's code may raise anything; keep the others going
        logger.error("group=%s member=%s W=%s failed", group.name, member.name, spec.watermark, exc_info=True)
        return Failure(first_lines(error), is_final(error) or failed_final_check(error))


def _compute(
    spark: SparkSession,
    line: SparkLine,
    spec: JobSpec,
    group: RefreshGroup,
    member: Member,
    captures: dict[str, TableCapture],
    staged: dict[str, MemberManifest],
) -> MemberManifest:
    logger.info("group=%s member=%s W=%s: computing", group.name, member.name, spec.watermark)
    definition = definition_digest(member)
    if isinstance(member, Mirror):
        capture = captures.get(member.name.lower())
        if capture is None:
            raise RefreshError(f"the capture manifest has no changelog for table {member.qualified_table!r}")
        source = mirror_input(spec, group, member, capture)
        return stage_mirror(spec, source, merge(spark, line, source), definition)
    states = {name: source_state(spec, group, member, name, staged, captures) for name in member.sources}
    for name, state in states.items():
        if state.columns is not None:  # a mirror: its columns are the source table's
            source_mirror = group.member(name)
            assert isinstance(source_mirror, Mirror)
            check_columns(line, state.columns.schema, f"its source {name!r}", source_mirror.qualified_table)
    sources = {name: state.files for name, state in states.items()}
    columns = {name: state.columns for name, state in states.items() if state.columns is not None}
    resynced = _resynced_source(group, member, staged)
    if isinstance(member, SqlMember):
        return stage_sql_member(spark, spec, group, member, states, definition, resynced)
    assert isinstance(member, PythonMember)
    context = CutContext(group, spec.watermark, spec.prev_watermark, spec.cut_number)
    reason = ""
    if member.incremental:
        basis = incremental_basis(spark, spec, member.name, states)
        if isinstance(basis, str):
            reason = f"whole: not incremental: {basis}"
        else:
            context = replace(context, previous=basis[0], changes=basis[1])
            reason = f"from its previous output and the changes of {', '.join(states)}"
        logger.info("group=%s member=%s W=%s: %s", group.name, member.name, spec.watermark, reason)
    frame = collected(compute_python_member(spark, group, member, sources, context, columns),
                      spec.previous_snapshot(member.name))
    return stage_member_output(frame, spec.staging_root, member.name, spec.watermark, (), definition,
                               reason=reason, resynced=resynced, inputs=staged_inputs(states))


def _resynced_source(group: RefreshGroup, member: Member, staged: dict[str, MemberManifest]) -> str:
    """Why a derived member's output may change its columns' types this run: a source of it was
    resynced (its table's types are the source's as they are now); empty otherwise."""
    for name in member.sources:
        manifest = staged.get(group.member(name).name)
        if manifest is not None and manifest.resynced:
            return f"its source {name!r} was resynced ({manifest.resynced})"
    return ""


def _reads_s3(spec: JobSpec) -> bool:
    """Whether the job reads or writes ``s3://`` URIs (its staging, or the previous cut's files)."""
    previous = (uri for files in (*spec.previous_files.values(), *spec.previous_deletes.values()) for uri in files)
    return any(storage.scheme_of(uri) == "s3" for uri in (spec.staging_root, *previous))


def merge(spark: SparkSession, line: SparkLine, source: MirrorInput) -> MirrorOutput | LocalMirrorOutput:
    """The mirror's merge: in this process when it can be (:mod:`.duckdb_merge`, unless the
    session sets ``spark.streambed.mirror.inProcessMerge`` to ``false``), else by Spark, if
    ``line`` can read the mirror's columns (:func:`.compat.spark.check_columns`)."""
    local = switched_on(spark.conf, IN_PROCESS_MERGE_CONF)
    merged = merge_in_process(source) if local else None
    if merged is not None:
        return merged
    if not line.has_time_type:  # the changelog's footer is read only where a column may be refused
        check_columns(line, FileColumns.of(source.capture).schema, f"mirror {source.member.name!r}",
                      source.member.qualified_table)
    return merge_mirror(spark, source)


def main(argv: Sequence[str]) -> int:
    """Entry point: ``<spec URI> [--members a,b] [--store key=value ...]``; returns the process exit code."""
    parser = argparse.ArgumentParser(prog="streambed-refresh", description=__doc__)
    parser.add_argument("spec_uri", help="URI of the job spec (JSON)")
    parser.add_argument("--members", default="", help="comma-separated members to compute (default: all)")
    parser.add_argument(STORE_OPTION, action="append", default=[], dest="store",
                        help="an object-store property of the staging location (key=value; never a secret)")
    arguments = parser.parse_args(list(argv))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    quiet_py4j()
    storage.configure(arguments.spec_uri.rsplit("/", 1)[0], parse_store(arguments.store))
    try:
        data = read_json(arguments.spec_uri)
        if data is None:
            raise RefreshError(f"no job spec at {arguments.spec_uri}")
        spec = JobSpec.from_dict(data)
        members = [name for name in arguments.members.split(",") if name]
        spark = build_session(f"streambed-{spec.group['name']}-{spec.run_key}")
        try:
            run_job(spark, spec, members)
        finally:
            spark.stop()
    except StreambedError as error:
        print(f"{FINAL_ERROR_MARKER if is_final(error) else ERROR_MARKER}{error}", file=sys.stderr, flush=True)
        return 1
    return 0
