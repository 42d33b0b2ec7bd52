"""Refresh of a group's members as of W on Spark: planning, the job, mirror merge, staging.

Importing this package needs no Spark: the planning and manifest functions are re-exported
here; the Spark job lives in :mod:`.job` (run by spark-submit through ``spark_entry.py``).
"""

from __future__ import annotations

from airflow_provider_streambed.refresh.plan import build_job_spec, write_job_spec
from airflow_provider_streambed.refresh.submit import job_application, job_arguments, run_local_spark_submit
from airflow_provider_streambed.staging.members import collect_member_manifests

__all__ = [
    "build_job_spec",
    "collect_member_manifests",
    "job_application",
    "job_arguments",
    "run_local_spark_submit",
    "write_job_spec",
]
