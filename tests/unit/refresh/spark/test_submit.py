"""Launching the refresh job: spark-submit arguments and command, error lines."""

from __future__ import annotations

from pathlib import Path

from airflow_provider_streambed.refresh import job_application, job_arguments
from airflow_provider_streambed.refresh.spark.submit import _error_summary, spark_submit_command


def test_job_arguments_and_command() -> None:
    assert Path(job_application()).name == "entry.py"
    assert Path(job_application()).is_file()
    assert job_arguments("file:///s/spec.json") == ["file:///s/spec.json"]
    assert job_arguments("file:///s/spec.json", ["orders", "totals"]) == [
        "file:///s/spec.json",
        "--members",
        "orders,totals",
    ]
    command = spark_submit_command("file:///s/spec.json", "local[2]", {"spark.sql.shuffle.partitions": "8"})
    assert command[1:3] == ["--master", "local[2]"]
    assert "spark.sql.shuffle.partitions=8" in command
    assert "spark.sql.shuffle.partitions=4" not in command
    assert "spark.ui.enabled=false" in command
    assert command[-2:] == [job_application(), "file:///s/spec.json"]


def test_error_summary_prefers_the_job_error_line() -> None:
    stdout = "noise\n12:00 INFO x STREAMBED-ERROR: group 'g', member 'm': boom\n"
    assert _error_summary(stdout, "") == ("group 'g', member 'm': boom", False)
    stderr = "26/01/01 INFO Spark: fine\njava.lang.OutOfMemoryError: heap\n"
    assert _error_summary("", stderr) == ("java.lang.OutOfMemoryError: heap", False)
    final = "12:00 STREAMBED-FINAL-ERROR: group 'g': member 'm': SchemaChangeError: dropped\n"
    assert _error_summary("noise\n", final) == ("group 'g': member 'm': SchemaChangeError: dropped", True)
