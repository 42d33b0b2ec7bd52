"""Refresh of a group's members as of W: the plan, the mirror merges, the derived members, the Spark job.

Importing this package needs no Spark: the planning, submitting and manifest functions are
re-exported here. Four sub-packages, each saying where its code runs:

- :mod:`.plan`: what a run computes (the job spec, the work per member, compaction, the guards);
  in the Airflow worker.
- :mod:`.mirrors`: the mirror merge, in the worker with DuckDB or in the Spark job, and compaction.
- :mod:`.derived`: Spark SQL and PySpark members and their incremental class.
- :mod:`.spark`: the Spark application and its two transports (spark-submit, Spark Connect).

:mod:`.in_process` composes the worker's pass: the mirrors and incremental SQL members staged in
the refresh task's process before any Spark application (the job composes the same in Spark).

A PySpark member's function is given a :class:`CutContext` and, when incremental, its sources'
:class:`Changes`: both are exported here, lazily, as they import pyspark.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_provider_streambed.refresh.plan.build import build_job_spec, write_job_spec
from airflow_provider_streambed.refresh.spark.submit import job_application, job_arguments, run_local_spark_submit
from airflow_provider_streambed.staging.members import collect_member_manifests

if TYPE_CHECKING:
    from airflow_provider_streambed.refresh.derived.incremental import Changes
    from airflow_provider_streambed.refresh.derived.members import CutContext

__all__ = [
    "Changes",
    "CutContext",
    "build_job_spec",
    "collect_member_manifests",
    "job_application",
    "job_arguments",
    "run_local_spark_submit",
    "write_job_spec",
]


def __getattr__(name: str) -> object:
    """Export what a PySpark member is given lazily: importing this package must not import pyspark."""
    if name == "CutContext":
        from airflow_provider_streambed.refresh.derived.members import CutContext

        return CutContext
    if name == "Changes":
        from airflow_provider_streambed.refresh.derived.incremental import Changes

        return Changes
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
