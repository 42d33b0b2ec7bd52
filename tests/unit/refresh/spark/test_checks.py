"""A job failed by one of the merges' checks is told apart from any other Spark error."""

from __future__ import annotations

from airflow_provider_streambed.refresh.spark.checks import FINAL_CHECK, failed_final_check


def test_only_the_raised_check_counts_not_a_plan_that_quotes_it() -> None:
    raised = f"[USER_RAISED_EXCEPTION] {FINAL_CHECK}a change deletes a row ... SQLSTATE: P0001"
    assert failed_final_check(RuntimeError(f"Job aborted due to stage failure: ... SparkRuntimeException: {raised}"))
    plan = (f"[INTERNAL_ERROR] ... Project [CASE WHEN (_net > 0) THEN _net ELSE raise_error(USER_RAISED_EXCEPTION, "
            f"map(keys: [errorMessage], values: [{FINAL_CHECK}a change deletes a row ...]), NullType) END]")
    assert not failed_final_check(RuntimeError(plan))
