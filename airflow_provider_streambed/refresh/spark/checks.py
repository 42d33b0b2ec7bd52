"""The merges' checks that run inside a Spark job, and how a job they fail is told apart.

A merge that Spark computes finds some impossible inputs only while it runs: a change that
deletes a row the previous cut lacks, an unchanged-TOAST value with no earlier image, a changed
key whose first change is not the delete of its old row. Each fails the job through
``raise_error`` with a message carrying :data:`FINAL_CHECK`; no retry of the run mends any of
them (its changelog and previous cut stay the same), so the job's failure is final
(:func:`failed_final_check`) and the run frees its group instead of keeping its claim.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

#: Prefix of every message of a check failed inside a Spark job.
FINAL_CHECK = "streambed final check: "
#: How Spark (classic and Connect) states the error a ``raise_error`` raised: a plan printed in
#: another error's message quotes the check's text, but never after this.
_RAISED = "[USER_RAISED_EXCEPTION] "


def final_check(message: str) -> Column:
    """A column that fails the job with ``message`` (marked :data:`FINAL_CHECK`) when evaluated."""
    return F.raise_error(F.lit(FINAL_CHECK + message))


def failed_final_check(error: BaseException) -> bool:
    """Whether ``error`` (Spark's, as raised by an action) is a job failed by :func:`final_check`
    (not another error whose message prints a plan holding the check)."""
    return _RAISED + FINAL_CHECK in str(error)
