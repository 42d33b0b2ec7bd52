"""Aggregates updated from a source's changes in the worker's process, with no Spark job.

:mod:`.spark_delta` updates a ``GROUP BY`` member from its source's changes in Spark: the query over
the rows added and removed, combined with the previous output. Each Spark job, and each schema
Spark analyses, is a round trip: on a warm Spark Connect server a run costs 0.4-0.7 s whatever the
changes' size, most of a small member's run. When the member's recorded shape
(:mod:`.member_shape`) describes its query entirely, the same update is computed here instead, by
DuckDB over the changes read by pyarrow (as the mirrors' merge is, :mod:`.duckdb_merge`), under
the same rule (:func:`.delta_rules.delta_reason`) and with the same results:

- the query reads one source, with no ``WHERE``: every row of the source is a row it groups;
- every aggregate is ``COUNT(*)`` or of a column of the source as it is (no expression);
- its means (``AVG``) are of integers (Spark divides decimals by rules of its own), its grouping
  columns and the arguments of its ``MIN`` and ``MAX`` of types DuckDB compares as Spark does
  (:func:`compared_alike`: no floating point, which Spark groups and orders by rules of its own
  for ``NaN`` and ``-0.0``);
- no group is one :func:`.delta_rules.recomputed_groups` names (a group that lost rows, with a
  ``MIN`` or ``MAX``);
- the previous output has at most
  :data:`~airflow_provider_streambed.staging.members.MAX_COLLECTED_ROWS` rows (small enough
  to collect) and no delete file,
  and the run changed at most :data:`MAX_CHANGED_ROWS` rows of the source (both are read into
  memory, the source's read columns only).

Otherwise Spark computes it, as before, and :func:`updated_in_process` logs why at debug level;
so it does when the update fails here (a sum past its type, an unreadable file), logged as a
warning. The output is staged with the previous output's columns and types, which are the query's.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from airflow_provider_streambed.member_declarations import SqlMember
from airflow_provider_streambed.refresh.derived.delta_rules import (
    AVERAGED_EXACTLY_UP_TO,
    EXTREMES,
    LOST,
    bounded_means,
    delta_reason,
    has_extremes,
)
from airflow_provider_streambed.refresh.derived.shape import AggregateOutput, GroupByShape, recorded_shape
from airflow_provider_streambed.refresh.derived.sources import (
    SourceState,
    basis_reason,
    changed_rows,
    live_rows,
    staged_inputs,
)
from airflow_provider_streambed.refresh.mirrors.merge_queries import quoted
from airflow_provider_streambed.refresh.plan.settings import Settings
from airflow_provider_streambed.staging import JobSpec, MemberManifest
from airflow_provider_streambed.staging.members import MAX_COLLECTED_ROWS, row_count, stage_member_output

logger = logging.getLogger(__name__)

#: Runs that changed more rows of the source than this are updated by Spark: the rows added and
#: removed are read into this process's memory (the columns the query reads).
MAX_CHANGED_ROWS = 1_000_000


def in_process_reason(shape: GroupByShape) -> str | None:
    """Why the query of ``shape`` is not updated in this process (see the module), or ``None``."""
    if len(shape.sources) != 1:
        return "it joins sources"
    if shape.filtered:
        return "a WHERE filters its source's rows"
    for aggregate in shape.aggregates:
        name = f"{aggregate.function.upper()} ({aggregate.output})"
        if aggregate.argument is not None and not aggregate.column:
            return f"{name} is of an expression"
        if aggregate.function == "avg" and aggregate.kind not in AVERAGED_EXACTLY_UP_TO:
            return f"{name} of a {aggregate.kind} is divided by Spark's rules"
    return None


def stage_updated(settings: Settings, spec: JobSpec, member: SqlMember, sources: Mapping[str, SourceState],
                  definition: str, resynced: str = "") -> MemberManifest | None:
    """Update the member in this process (:func:`updated_in_process`) and stage its output for W;
    ``None`` when Spark must compute it.

    Args:
        settings: Spark configuration (:data:`.sources.INCREMENTAL_CONF`): the session's in
            a Spark application, the refresh's own in the refresh task.
        spec: the run's job spec (the member's recorded shape and previous output).
        member: an incremental SQL member.
        sources: its sources at W.
        definition: the member's definition digest, staged with its output.
        resynced: why the output may change its columns' types this run (staged with it).
    """
    output = updated_in_process(settings, spec, member, sources)
    if output is None:
        return None
    reason = f"its aggregates updated from the changes of {', '.join(member.sources)} in this process"
    logger.info("group=%s member=%s W=%s: %s", spec.group["name"], member.name, spec.watermark, reason)
    return stage_member_output(output, spec.staging_root, member.name, spec.watermark, (), definition,
                               reason=reason, resynced=resynced, shape=spec.shapes[member.name],
                               inputs=staged_inputs(sources))


def updated_in_process(
    settings: Settings, spec: JobSpec, member: SqlMember, sources: Mapping[str, SourceState]
) -> pa.Table | None:
    """The member's output at W updated from its previous output and its one source's changes in
    this process, or ``None`` when Spark must compute it (see the module; why is logged: at debug
    level, or as a warning when the update failed here)."""
    where = f"group={spec.group['name']} member={member.name}"
    try:
        updated = _updated(settings, spec, member, sources)
    except (duckdb.Error, pa.ArrowException, KeyError, ValueError, OSError) as error:  # Spark computes it
        logger.warning("%s: updated by Spark: the update in this process failed: %s: %s", where,
                       type(error).__name__, str(error).splitlines()[0])
        return None
    if isinstance(updated, str):
        logger.debug("%s: updated by Spark: %s", where, updated)
        return None
    return updated


def _updated(settings: Settings, spec: JobSpec, member: SqlMember,
             sources: Mapping[str, SourceState]) -> pa.Table | str:
    """The update in this process, or why Spark computes it."""
    shape = _shape(settings, spec, member, sources)
    if isinstance(shape, str):
        return shape
    source, names = sources[shape.sources[0]], list(shape.read[shape.sources[0]])
    previous = live_rows(spec.previous_snapshot(member.name))
    assert previous is not None  # basis_reason: the previous output has files
    removed, added = changed_rows(source, names)
    like = added if added is not None else removed
    if like is None:
        return "its source's output this run has no files"
    empty = like.schema.empty_table()
    return updated_table(shape, previous, empty if added is None else added, empty if removed is None else removed)


def _shape(settings: Settings, spec: JobSpec, member: SqlMember,
           sources: Mapping[str, SourceState]) -> GroupByShape | str:
    """The member's recorded shape when the member may be updated in this process this run, else why not."""
    shape = recorded_shape(spec.shapes.get(member.name))
    if not isinstance(shape, GroupByShape):
        return f"no recorded GROUP BY shape ({shape or 'none'})"
    if reason := in_process_reason(shape) or basis_reason(settings, spec, member.name, sources):
        return reason
    staged = sources[shape.sources[0]].staged
    if staged is None:
        return "its source is carried"
    if reason := delta_reason(shape, shape.sources):
        return reason
    previous = spec.previous_snapshot(member.name)
    if previous.deletes or row_count(previous.data) > MAX_COLLECTED_ROWS:
        return f"its previous output has delete files or more than {MAX_COLLECTED_ROWS:,} rows"
    if staged.row_count + staged.deleted_rows > MAX_CHANGED_ROWS:
        return f"its source changed more than {MAX_CHANGED_ROWS:,} rows"
    return shape


def updated_table(shape: GroupByShape, previous: pa.Table, added: pa.Table, removed: pa.Table) -> pa.Table | str:
    """The output at W of a query of ``shape`` (one :func:`in_process_reason` and
    :func:`.delta_rules.delta_reason` accept) from its ``previous`` output and its source's rows
    ``added`` and ``removed`` (the columns it reads), with the previous output's schema; or why
    Spark must compute it (a group the changes alone do not update, a floating-point group)."""
    compared = [key.output for key in shape.keys] + [extreme.output for extreme in shape.aggregates
                                                     if extreme.function in EXTREMES]
    if unlike := [name for name in compared if not compared_alike(previous.schema.field(name).type)]:
        return f"its column {unlike[0]} is compared by Spark's rules ({previous.schema.field(unlike[0]).type})"
    database = duckdb.connect()
    for relation, rows in (("previous", previous), ("added", added), ("removed", removed)):
        database.register(relation, rows)
    result = database.execute(update_query(shape, previous.schema)).to_arrow_table()
    if pc.any(result[LOST]).as_py():
        return "some groups lost rows and have a MIN or MAX, or count more rows than their AVG is exact for"
    return result.select(previous.schema.names).cast(previous.schema)


def update_query(shape: GroupByShape, output: pa.Schema) -> str:
    """DuckDB's query of the member's output at W from the relations ``previous`` (its previous
    output, of schema ``output``), ``added`` and ``removed`` (its source's rows added and removed),
    as :func:`.spark_delta.updated_aggregates` computes it, with the column :data:`LOST`."""
    keys = [quoted(key.output) for key in shape.keys]
    groups = ", ".join(str(i + 1) for i in range(len(keys)))
    from_source = [f"{quoted(key.column)} AS {quoted(key.output)}" for key in shape.keys]

    def parts(tag: str) -> list[str]:
        return [_part(tag, i) for i in range(len(shape.aggregates))]

    def of_rows(tag: str) -> str:
        return ", ".join(from_source + [f"{_of_rows(aggregate)} AS {part}"
                                        for aggregate, part in zip(shape.aggregates, parts(tag), strict=True)])

    previous = ", ".join(keys + [f"{quoted(aggregate.output)} AS {part}"
                                 for aggregate, part in zip(shape.aggregates, parts("p"), strict=True)])
    sides = [f"SELECT {previous} FROM previous", f"SELECT {of_rows('a')} FROM added GROUP BY {groups}",
             f"SELECT {of_rows('r')}, TRUE AS {LOST} FROM removed GROUP BY {groups}"]
    merged = (f"SELECT {', '.join(keys)}, {', '.join(f'max({part}) AS {part}' for tag in 'par' for part in parts(tag))}"
              f", coalesce(bool_or({LOST}), FALSE) AS {LOST} FROM ({' UNION ALL BY NAME '.join(sides)}) "
              f"GROUP BY {groups}")
    counts = {aggregate.argument: i for i, aggregate in enumerate(shape.aggregates) if aggregate.function == "count"}
    sums = {aggregate.argument: i for i, aggregate in enumerate(shape.aggregates) if aggregate.function == "sum"}
    values = [f"{_value(i, aggregate, counts, sums, output)} AS {quoted(aggregate.output)}"
              for i, aggregate in enumerate(shape.aggregates)]
    lost = [LOST] if has_extremes(shape) else []
    lost += [f"{_total(counts[mean.argument], 'HUGEINT')} > {AVERAGED_EXACTLY_UP_TO[mean.kind]}"
             for mean in bounded_means(shape)]
    return (f"SELECT {', '.join(keys)}, {', '.join(values)}, {' OR '.join(lost) or 'FALSE'} AS {LOST} "
            f"FROM ({merged}) WHERE {_total(counts[None], 'HUGEINT')} > 0")


def _part(tag: str, i: int) -> str:
    """The column of aggregate ``i`` over the previous output (``p``), the rows added (``a``) or removed (``r``)."""
    return f"_streambed_{tag}{i}"


def _of_rows(aggregate: AggregateOutput) -> str:
    """The aggregate over source rows (none for an ``AVG``: its value comes of its sum and count)."""
    if aggregate.function == "avg":
        return "NULL"
    return f"{aggregate.function}({'*' if aggregate.argument is None else quoted(aggregate.column)})"


def _value(i: int, aggregate: AggregateOutput, counts: Mapping[int | None, int], sums: Mapping[int | None, int],
           output: pa.Schema) -> str:
    """Aggregate ``i``'s value at W, as :func:`.spark_delta.updated_aggregates` computes it."""
    if aggregate.function == "count":
        return _total(i, "HUGEINT")
    if aggregate.function in EXTREMES:
        return f"{'least' if aggregate.function == 'min' else 'greatest'}({_part('p', i)}, {_part('a', i)})"
    counted = _total(counts[aggregate.argument], "HUGEINT")
    if aggregate.function == "sum":
        kind = output.field(aggregate.output).type
        value = _total(i, f"DECIMAL(38, {kind.scale})" if pa.types.is_decimal(kind) else "HUGEINT")
    else:  # an integer's mean: Spark divides its sum (a bigint) as a double by its count as a double
        summed = _total(sums[aggregate.argument], "HUGEINT")
        value = f"CAST(CAST({summed} AS BIGINT) AS DOUBLE) / CAST({counted} AS DOUBLE)"
    return f"CASE WHEN {counted} = 0 THEN NULL ELSE {value} END"


def _total(i: int, kind: str) -> str:
    """Previous plus added less removed values of aggregate ``i`` (absent: 0), added as ``kind``."""
    return " - ".join([" + ".join(f"coalesce(CAST({_part(tag, i)} AS {kind}), 0)" for tag in "pa"),
                       f"coalesce(CAST({_part('r', i)} AS {kind}), 0)"])


def compared_alike(kind: pa.DataType) -> bool:
    """Whether DuckDB compares and orders values of Arrow type ``kind`` as Spark does: integers,
    decimals, strings and binaries (by their bytes), dates, timestamps and booleans; not floating
    point (Spark groups ``NaN`` and ``-0.0`` by rules of its own) nor nested types."""
    return any(test(kind) for test in (pa.types.is_integer, pa.types.is_decimal, pa.types.is_string,
                                       pa.types.is_large_string, pa.types.is_binary, pa.types.is_large_binary,
                                       pa.types.is_date, pa.types.is_timestamp, pa.types.is_boolean))
