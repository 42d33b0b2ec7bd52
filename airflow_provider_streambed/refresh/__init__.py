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
"""

from __future__ import annotations

from airflow_provider_streambed.refresh.plan.build import build_job_spec, write_job_spec
from airflow_provider_streambed.refresh.spark.submit import job_application, job_arguments, run_local_spark_submit
from airflow_provider_streambed.staging.members import collect_member_manifests

__all__ = [
    "build_job_spec",
    "collect_member_manifests",
    "job_application",
    "job_arguments",
    "run_local_spark_submit",
    "write_job_spec",
]
