"""Refresh of a group's members as of W: planning, the in-process merge, the Spark job, staging.

Importing this package needs no Spark: the planning, submitting and manifest functions are
re-exported here. One concept per module:

- :mod:`.plan` builds the run's job spec from the ledger and catalog; :mod:`.work` decides which
  members are computed, carried or still to compute; :mod:`.compaction` which are rewritten whole.
- :mod:`.copies` and :mod:`.in_process` stage mirrors on the worker without Spark: bootstrap
  copies adopted as they are, and mirrors merged with DuckDB (:mod:`.mirror_local`).
- :mod:`.submit` launches the Spark job with spark-submit; :mod:`.connect` runs it as a Spark
  Connect client.
- :mod:`.job` is the Spark application (through ``spark_entry.py``), on the session of
  :mod:`.session`; it merges mirrors with :mod:`.mirror` (or :mod:`.mirror_local`) and computes
  derived members with :mod:`.members`. The checks a Spark merge fails the run with, as final,
  are :mod:`.spark_checks`.
- :mod:`.settings` reads the provider's on/off Spark settings wherever they are set.
- :mod:`.spec`, :mod:`.mirror_input` and :mod:`.mirror_output` are shared by both paths and
  import no pyspark: the spec's checks and captures, what a merge reads, what it gives and how
  that is staged.
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
