"""Spark's merge of a keyless mirror (:attr:`~airflow_provider_streambed.staging.TableCapture.keyless`).

A keyless mirror is a multiset: per distinct row (nulls equal), its inserts minus its deletes
(an update is a delete of its old image and an insert) is how many copies the run adds or
removes. Added copies are new
data files; a removed copy deletes one previous live row equal to it by position, as many as it
loses. A delete of a row the previous cut does not hold fails the merge
(:class:`~airflow_provider_streambed.exceptions.MirrorDivergedError`): the mirror is no longer
its source.
"""

from __future__ import annotations

from functools import reduce
from operator import and_

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from airflow_provider_streambed.read.spark_snapshot import ROW_FILE, ROW_POS, SnapshotScan
from airflow_provider_streambed.refresh.mirrors.merge_input import MirrorInput, diverged
from airflow_provider_streambed.refresh.spark.checks import final_check
from airflow_provider_streambed.staging import OP, OP_DELETE

#: A keyless change's count column: copies of its row added (negative: removed).
NET = "_net"


def _net(rows: DataFrame, columns: list[str]) -> DataFrame:
    """Each distinct row (nulls equal) with ``_net``: how many copies ``rows`` add (a delete, ``D``,
    removes one; every other row adds one); rows that net to zero are left out."""
    count = F.sum(F.when(F.col(OP) == OP_DELETE, -1).otherwise(1)).alias(NET)
    return rows.groupBy(*columns).agg(count).where(F.col(NET) != 0)


def _copies(net: DataFrame, columns: list[str]) -> DataFrame:
    """``_net`` copies of each row of ``net`` whose ``_net`` is positive."""
    return net.where(F.col(NET) > 0).select(*columns, F.explode(F.array_repeat(F.lit(0), F.col(NET).cast("int"))))


def multiset(rows: DataFrame, columns: list[str]) -> DataFrame:
    """A keyless mirror written whole: each distinct row as many times as the previous rows and
    the changes leave it; fails the job when the changes delete a row the previous rows lack."""
    net = _net(rows, columns).withColumn(NET, F.when(F.col(NET) > 0, F.col(NET)).otherwise(
        final_check("a change deletes a row that the previous cut does not hold: the mirror no longer equals its "
                    "source table; resync the member")))
    return _copies(net, columns).select(*columns)


def net_rows(
    source: MirrorInput, previous: SnapshotScan, change_rows: DataFrame, columns: list[str], few: bool
) -> tuple[DataFrame, DataFrame]:
    """A keyless mirror merge-on-read: the rows the changes add, and position deletes of as many
    previous live rows equal to each row the changes remove as they remove.

    Raises:
        MirrorDivergedError: the previous cut holds fewer rows equal to a removed row than the
            changes remove.
    """
    net = _net(change_rows, columns)
    removed = net.where(F.col(NET) < 0).select(*[F.col(name).alias(f"_removed_{name}") for name in columns], NET)
    condition = reduce(and_, [F.col(name).eqNullSafe(removed[f"_removed_{name}"]) for name in columns])
    candidates = previous.rows(columns, positions=True).join(F.broadcast(removed) if few else removed, condition)
    order = Window.partitionBy(*[f"_removed_{name}" for name in columns]).orderBy(ROW_FILE, ROW_POS)
    # cached: the previous rows are read once, for the check and for the deletes (a few rows' positions)
    ranked = candidates.withColumn("_rank", F.row_number().over(order))
    chosen = ranked.where(F.col("_rank") <= -F.col(NET)).select(ROW_FILE, ROW_POS).cache()
    wanted = removed.agg(F.coalesce(-F.sum(NET), F.lit(0))).first()
    found = chosen.count()
    if wanted is not None and found < wanted[0]:
        raise diverged(source, f"the previous cut holds {wanted[0] - found} fewer rows equal to rows the changes "
                               "delete than they delete")
    return _copies(net, columns).select(*columns), previous.deletes_of(chosen)
