"""Incremental SQL members: a ``GROUP BY`` over one source, recomputed for the groups a run touched.

A group's output row depends only on the source rows of that group (:mod:`.sql_shape` checks
the query is of that class), so the member at W is its previous output less the rows of the
groups whose source rows changed (a key of a removed or added row), plus the query's result over
the source rows of those groups only. Every aggregate is then right, ``MIN`` and ``MAX`` of a
group that lost its extreme included; a touched group that has no rows left has no row in that
result, so it is gone; keys compare NULL-safe, so a NULL key is a group like any other. The output
is staged whole, like every derived output: the member's previous output is small beside its
source, and a whole output keeps publishing and the feed as they are.
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
from airflow_provider_streambed.refresh.incremental import Changes, SourceState, incremental_basis
from airflow_provider_streambed.refresh.members import bound_query, read_sources, sql_member_frame
from airflow_provider_streambed.refresh.sql_shape import GroupByShape, group_by_shape
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
    files = {name: source.files for name, source in sources.items()}
    columns = {name: source.columns for name, source in sources.items() if source.columns is not None}
    with sql_member_frame(spark, group, member, files, columns) as frame:
        if not member.incremental:
            return stage_member_output(frame, spec.staging_root, member.name, spec.watermark, (), definition,
                                       resynced=resynced)
        shape = group_by_shape(frame, member.sources)
        basis = shape if isinstance(shape, str) else incremental_basis(spark, spec, member.name, sources)
        why = f"not incremental: {basis}" if isinstance(basis, str) or isinstance(shape, str) else \
            mostly_touched(basis[0], touched_keys(basis[1][shape.source], shape))
        if why:
            reason = f"whole: {why}"
            logger.info("%s: %s", where, reason)
            return stage_member_output(frame, spec.staging_root, member.name, spec.watermark, (), definition,
                                       reason=reason, resynced=resynced)
    assert not isinstance(shape, str) and not isinstance(basis, str)
    reason = f"the groups of {shape.source} its changes touched recomputed, the others kept"
    logger.info("%s: %s", where, reason)
    previous, changes = basis
    with maintained_output(spark, group, member, shape, previous, changes[shape.source],
                           sources[shape.source]) as output:
        return stage_member_output(output, spec.staging_root, member.name, spec.watermark, (), definition,
                                   reason=reason, resynced=resynced)


def mostly_touched(previous: DataFrame, touched: DataFrame) -> str:
    """Why the member is computed whole although it could be maintained: its changes touched more
    than :data:`MAX_TOUCHED_SHARE` of its groups (empty when they touched fewer)."""
    groups, changed = previous.count(), touched.count()
    if changed > MAX_TOUCHED_SHARE * groups:
        return f"its changes touched {changed} of its {groups} groups (more than {MAX_TOUCHED_SHARE:.0%})"
    return ""


def touched_keys(changes: Changes, shape: GroupByShape) -> DataFrame:
    """The distinct grouping values (source columns) of the rows the source lost or gained."""
    columns = [source for _, source in shape.keys]
    return changes.removed.select(*columns).unionByName(changes.added.select(*columns)).distinct()


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
    changes: Changes, source: SourceState,
) -> Iterator[DataFrame]:
    """The member's output at W from its ``previous`` output and its source's ``changes`` (see the
    module), valid until the block ends (its source view is bound until then)."""
    touched = touched_keys(changes, shape)
    rows = read_sources(spark, {shape.source: source.files},
                        {} if source.columns is None else {shape.source: source.columns})[shape.source]
    source_keys = [(column, column) for _, column in shape.keys]
    with bound_query(spark, group, member, {shape.source: in_groups(rows, touched, source_keys, True)}) as recomputed:
        kept = in_groups(previous, touched, shape.keys, False)
        yield required_as(kept.unionByName(recomputed), recomputed.schema)


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
