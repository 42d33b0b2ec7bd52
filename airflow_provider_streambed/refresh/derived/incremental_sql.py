"""Incremental SQL members: a ``GROUP BY`` over a source or key equi-joins, recomputed for the groups a run touched.

A group's output row depends only on the (joined) source rows of that group (:mod:`.query_shape`
checks the query is of that class), so the member at W is its previous output less the rows of
the groups the run touched, plus the query's result for those groups. The touched groups are
found by the query itself (:func:`touched_groups`): the groups of the joined rows the run removed
or added, through every source's changes, a dimension's changed row included (the groups of the
rows it met before and meets now). The result for those groups is the query over the sources at W
each read through a semi-join on the touched keys of its own grouping columns (a source without
any is read whole), kept for the touched keys. Every aggregate is then right, ``MIN`` and ``MAX``
of a group that lost its extreme included; a touched group that has no rows left has no row in
that result, so it is gone; keys compare NULL-safe, so a NULL key is a group like any other. The
output is staged whole, like every derived output: the member's previous output is small beside
its sources, and a whole output keeps publishing and the feed as they are. When its aggregates
allow it and one of its sources changed (the others carried), the member is instead updated from
that source's changes alone (:mod:`.spark_delta`), and only the groups that cannot be updated so
are recomputed as above; when its recorded shape describes the query entirely, that update is
computed in this process, without a Spark job (:mod:`.duckdb_delta`).
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import operator
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from decimal import Decimal

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructField,
    StructType,
)

from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.member_declarations import SqlMember
from airflow_provider_streambed.refresh.derived.delta_rules import LOST, delta_reason, recomputed_groups
from airflow_provider_streambed.refresh.derived.duckdb_delta import stage_updated
from airflow_provider_streambed.refresh.derived.incremental import Changes, incremental_basis
from airflow_provider_streambed.refresh.derived.member_shape import member_shape
from airflow_provider_streambed.refresh.derived.members import bound_query, collected, detached, read_sources
from airflow_provider_streambed.refresh.derived.shape import GroupByShape
from airflow_provider_streambed.refresh.derived.sources import SourceState, staged_inputs
from airflow_provider_streambed.refresh.derived.spark_delta import updated_aggregates
from airflow_provider_streambed.staging import JobSpec, MemberManifest
from airflow_provider_streambed.staging.members import stage_member_output

logger = logging.getLogger(__name__)

#: A member whose changes touched more than this share of its groups is computed whole: the
#: maintenance reads those groups' source rows anyway, on top of its own jobs (measured: 141-181 %
#: of a whole recompute when every group is touched).
MAX_TOUCHED_SHARE = 0.5


def stage_sql_member(
    spark: SparkSession, spec: JobSpec, group: RefreshGroup, member: SqlMember, sources: Mapping[str, SourceState],
    definition: str = "", resynced: str = "",
) -> MemberManifest:
    """Compute the member at W, from its previous output when its query and the run allow it
    (else whole, logged with why), and stage its output."""
    where = f"group={group.name} member={member.name} W={spec.watermark}"

    def staged(frame: DataFrame, reason: str, record: str = "") -> MemberManifest:
        if reason:
            logger.info("%s: %s", where, reason)
        output = collected(frame, spec.previous_snapshot(member.name))
        return stage_member_output(output, spec.staging_root, member.name, spec.watermark, (), definition,
                                   reason=reason, resynced=resynced, shape=record, inputs=staged_inputs(sources))

    if member.incremental and (local := stage_updated(spark.conf, spec, member, sources, definition, resynced)):
        return local
    columns = {name: source.columns for name, source in sources.items() if source.columns is not None}
    at_w = read_sources(spark, {name: source.files for name, source in sources.items()}, columns)  # read once

    def whole(why: str, record: str = "") -> MemberManifest:
        with bound_query(spark, group, member, at_w) as frame:
            return staged(frame, f"whole: {why}" if why else "", record)

    if not member.incremental:
        return whole("")
    shape, record = member_shape(spark, group, member, {name: source.key for name, source in sources.items()}, at_w,
                                 spec.shapes.get(member.name))
    basis = shape if isinstance(shape, str) else incremental_basis(spark, spec, member.name, sources, shape.read)
    if isinstance(basis, str) or isinstance(shape, str):
        return whole(f"not incremental: {basis}", record)
    previous, changes = basis
    changed = [name for name in shape.sources if sources[name].staged is not None]  # not carried
    if (not_summed := delta_reason(shape, changed)) is None:
        source = changed[0] if changed else shape.sources[0]
        reason = f"its aggregates updated from the changes of {source}"
        with updated_output(spark, group, member, shape, previous, source, changes[source], at_w) as (output, lost):
            if lost is None or lost.isEmpty():
                return staged(output, reason, record)
        previous, touched = output, lost
        reason += f", {recomputed_groups(shape)} recomputed"
    else:
        touched = touched_groups(spark, group, member, shape, changes, sources, at_w)
        reason = (f"the groups of {' JOIN '.join(shape.sources)} its changes touched recomputed, the others kept "
                  f"(not updated from the changes alone: {not_summed})")
    if why := mostly_touched(previous, touched):
        return whole(why, record)
    with maintained_output(spark, group, member, shape, previous, touched, at_w) as output:
        return staged(output, reason, record)


@contextmanager
def updated_output(
    spark: SparkSession, group: RefreshGroup, member: SqlMember, shape: GroupByShape, previous: DataFrame,
    source: str, changes: Changes, at_w: Mapping[str, DataFrame],
) -> Iterator[tuple[DataFrame, DataFrame | None]]:
    """The member's output at W updated from its ``previous`` output and the ``changes`` of its one
    changed ``source``, joined to its other sources ``at_w`` if any
    (:func:`.spark_delta.updated_aggregates`; ``source`` is not scanned), valid until the block
    ends, and the output keys of the groups it cannot update so (:func:`.delta_rules.recomputed_groups`;
    ``None`` when the query has none). When there are such groups, both are held by Spark and
    valid after the block too (the groups are then recomputed from the sources).

    The query runs over each side of the changes that may hold rows (an empty side's result is
    empty): the last of them in the block, the removed rows' before it (held on Spark Connect,
    :func:`.members.detached`)."""
    sides = [rows for rows, any_rows in ((changes.removed, changes.any_removed), (changes.added, changes.any_added))
             if any_rows] or [changes.added]
    results = []
    for rows in sides[:-1]:  # the removed rows, when both sides may hold rows
        with bound_query(spark, group, member, {**at_w, source: rows}) as frame:
            results.append(detached(frame))
    with bound_query(spark, group, member, {**at_w, source: sides[-1]}) as last:
        results.append(last)
        removed, added = (results[0] if changes.any_removed else last.limit(0),
                          results[-1] if changes.any_added else last.limit(0))
        updated = updated_aggregates(shape, previous, added, removed, last.schema)
        if not recomputed_groups(shape):
            yield required_as(updated.drop(LOST), last.schema), None
            return
        updated = updated.localCheckpoint()  # read twice, and after the block
        lost = updated.where(LOST).select(*[key.output for key in shape.keys])
        yield required_as(updated.drop(LOST), last.schema), lost


def mostly_touched(previous: DataFrame, touched: DataFrame) -> str:
    """Why the member is computed whole although it could be maintained: its changes touched more
    than :data:`MAX_TOUCHED_SHARE` of its groups (empty when they touched fewer)."""
    groups, changed = previous.count(), touched.count()
    if changed > MAX_TOUCHED_SHARE * groups:
        return f"its changes touched {changed} of its {groups} groups (more than {MAX_TOUCHED_SHARE:.0%})"
    return ""


def touched_groups(
    spark: SparkSession, group: RefreshGroup, member: SqlMember, shape: GroupByShape, changes: Mapping[str, Changes],
    sources: Mapping[str, SourceState], after: Mapping[str, DataFrame],
) -> DataFrame:
    """The distinct output keys of the groups whose joined rows the run changed, held by Spark
    (``after``: the sources' rows at W).

    A joined row the run removed has a component some source removed, its others in the previous
    cut; one it added has a component some source added, its others at W. So the keys are those
    of the query over, per source, its removed rows with the other sources as they were, and its
    added rows with the others at W (over one source: the keys of its removed and added rows).
    """
    keys = [key.output for key in shape.keys]
    columns = {name: source.columns for name, source in sources.items() if source.columns is not None}
    before = read_sources(spark, {name: source.previous for name, source in sources.items()}, columns)
    found = []
    for name in shape.sources:
        for rows, others in ((changes[name].removed, before), (changes[name].added, after)):
            with bound_query(spark, group, member, {**others, name: rows}) as frame:
                found.append(detached(frame.select(*keys)))
    return functools.reduce(DataFrame.unionByName, found).distinct().localCheckpoint()


def in_groups(rows: DataFrame, keys: DataFrame, pairs: Sequence[tuple[str, str]], keep: bool) -> DataFrame:
    """``rows`` whose columns ``pairs[i][0]`` equal (NULL-safe) ``keys``' columns ``pairs[i][1]`` in
    some row of ``keys`` (``keep``), or in none (not ``keep``)."""
    renamed = keys.select(*[F.col(key).alias(f"_touched_{i}") for i, (_, key) in enumerate(pairs)])
    condition = functools.reduce(operator.and_, [
        rows[column].eqNullSafe(renamed[f"_touched_{i}"]) for i, (column, _) in enumerate(pairs)])
    return rows.join(renamed, condition, "left_semi" if keep else "left_anti")


@contextmanager
def maintained_output(
    spark: SparkSession, group: RefreshGroup, member: SqlMember, shape: GroupByShape, previous: DataFrame,
    touched: DataFrame, at_w: Mapping[str, DataFrame],
) -> Iterator[DataFrame]:
    """The member's output at W from its ``previous`` output, the keys of the groups its sources'
    changes ``touched`` (see the module) and the sources' rows ``at_w``, valid until the block ends
    (its source views are bound until then)."""
    restricted = {name: touched_rows(rows, touched, shape, name) for name, rows in at_w.items()}
    outputs = [(key.output, key.output) for key in shape.keys]
    with bound_query(spark, group, member, restricted) as recomputed:
        kept = in_groups(previous, touched, outputs, False)
        yield required_as(kept.unionByName(in_groups(recomputed, touched, outputs, True)), recomputed.schema)


def touched_rows(rows: DataFrame, touched: DataFrame, shape: GroupByShape, source: str) -> DataFrame:
    """The ``rows`` of ``source`` that may be in a touched group: those whose grouping columns equal
    (NULL-safe) a touched key's, or all of them when it gives no grouping column."""
    pairs = [(key.column, key.output) for key in shape.keys if key.source == source]
    return in_groups(rows, touched, pairs, True) if pairs else rows


def required_as(frame: DataFrame, schema: StructType) -> DataFrame:
    """``frame`` with the columns that ``schema`` (the query's own) holds non-nullable marked so
    (``coalesce`` with a constant of their type, which never applies: they hold no NULL), so the
    output's schema is the whole query's; columns of other types stay nullable."""
    def column(field: StructField) -> Column:
        zero = None if field.nullable else _ZEROS.get(type(field.dataType))
        if zero is None:
            return F.col(field.name)
        return F.coalesce(F.col(field.name), F.lit(zero).cast(field.dataType)).alias(field.name)

    return frame.select(*[column(field) for field in schema.fields])


#: A constant of each type whose non-nullable columns :func:`required_as` marks.
_ZEROS: dict[type[DataType], object] = {
    **dict.fromkeys((ByteType, ShortType, IntegerType, LongType), 0),
    **dict.fromkeys((FloatType, DoubleType), 0.0),
    DecimalType: Decimal(0), StringType: "", BooleanType: False, DateType: dt.date(1970, 1, 1),
}
