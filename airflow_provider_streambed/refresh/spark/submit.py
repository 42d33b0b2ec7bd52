"""Launching the refresh job with spark-submit: the application, its arguments, the command, a local run.

Submitting is the caller's business (``SparkSubmitHook`` in Airflow, with :func:`job_application`
and :func:`job_arguments`); :func:`run_local_spark_submit` runs the venv's spark-submit for code
without Airflow (tests, benchmarks, ``refresh_once``).
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from airflow_provider_streambed import storage
from airflow_provider_streambed.dependencies import check_spark_reachable
from airflow_provider_streambed.exceptions import FinalRefreshError, RefreshError
from airflow_provider_streambed.refresh.spark.connect_variables import CONNECT_VARIABLES
from airflow_provider_streambed.refresh.spark.object_store import store_arguments
from airflow_provider_streambed.staging.members import ERROR_MARKER, FINAL_ERROR_MARKER

logger = logging.getLogger(__name__)

#: Defaults for a local run: small shuffles and no UI keep a short job short.
LOCAL_CONF = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.driver.memory": "1g",
    "spark.sql.adaptive.enabled": "true",
}


def job_application() -> str:
    """Path of the script spark-submit runs (``refresh/spark/entry.py``)."""
    return str(Path(__file__).with_name("entry.py"))


def job_arguments(spec_uri: str, members: Sequence[str] = ()) -> list[str]:
    """The application arguments: the spec URI, ``--members`` for one application per member, and
    the public properties of the object store the spec is on (``--store``: endpoint, region; never
    a key), which the job needs to read its spec."""
    arguments = [spec_uri]
    if members:
        arguments += ["--members", ",".join(members)]
    return arguments + store_arguments(storage.public_properties(storage.configured_properties(spec_uri)))


def spark_submit_executable() -> str:
    """spark-submit from PATH, else next to this Python.

    Raises:
        RefreshError: there is none: pyspark-client alone (without the ``spark-submit`` extra)
            has no launcher; the message says what to install or use instead.
    """
    executable = shutil.which("spark-submit") or str(Path(sys.executable).with_name("spark-submit"))
    if not Path(executable).exists():
        raise RefreshError(
            "spark-submit is not installed here: install airflow-provider-streambed[spark-submit] (full pyspark "
            "and Java), or run the refresh on a Spark Connect server (a spark_connect connection, or spark_remote)"
        )
    return executable


def spark_submit_command(
    spec_uri: str, master: str = "local[2]", conf: Mapping[str, str] | None = None, members: Sequence[str] = ()
) -> list[str]:
    """The spark-submit command line (:func:`spark_submit_executable`)."""
    command = [spark_submit_executable(), "--master", master]
    for key, value in {**LOCAL_CONF, **(conf or {})}.items():
        command += ["--conf", f"{key}={value}"]
    return [*command, job_application(), *job_arguments(spec_uri, members)]


def run_local_spark_submit(
    spec_uri: str, master: str = "local[2]", conf: Mapping[str, str] | None = None, members: Sequence[str] = ()
) -> None:
    """Run the job with spark-submit in a subprocess, the driver using this Python and import path
    and, in its environment, the credentials of the object store the spec is on.

    Raises:
        SparkUnavailableError: a ``spark://`` master cannot be reached (nothing was submitted).
        RefreshError: the application failed; the message carries the job's own error line
            (naming the failed members) or the last error lines of spark-submit's output.
    """
    check_spark_reachable(master)
    command = spark_submit_command(spec_uri, master, conf, members)
    bin_dir = str(Path(sys.executable).parent)
    environment = {
        **{name: value for name, value in os.environ.items() if name not in CONNECT_VARIABLES},
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PYTHONPATH": os.pathsep.join(path or os.getcwd() for path in sys.path),
        "PATH": os.pathsep.join([os.environ.get("PATH", ""), bin_dir]),
        **storage.credential_environment(spec_uri),  # the driver's S3A and pyarrow read them; never argv
    }
    logger.info("spark-submit master=%s spec=%s members=%s", master, spec_uri, ",".join(members) or "all")
    completed = subprocess.run(command, env=environment, capture_output=True, text=True, check=False)
    if completed.returncode != 0:
        summary, final = _error_summary(completed.stdout, completed.stderr)
        raise (FinalRefreshError if final else RefreshError)(
            f"spark-submit failed (exit {completed.returncode}): {summary}")


def _error_summary(stdout: str, stderr: str) -> tuple[str, bool]:
    """The job's own error line if it printed one (Spark passes the driver's stderr to stdout),
    and whether it is final."""
    for marker in (FINAL_ERROR_MARKER, ERROR_MARKER):
        marked = [line.split(marker, 1)[1] for line in (stdout + stderr).splitlines() if marker in line]
        if marked:
            return " ".join(marked), marker == FINAL_ERROR_MARKER
    lines = [line for line in stderr.splitlines() if " INFO " not in line and " WARN " not in line]
    errors = [line for line in lines if "Error" in line or "Exception" in line]
    return " | ".join((errors or lines)[-5:]), False
