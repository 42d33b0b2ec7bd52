"""Virtualenvs with another pyspark (or Airflow) than the default one, made once and kept: for Iceberg's Spark
runtime (which has no build for the default pyspark 4.2) and for the matrices of Spark lines and
Airflow releases (``airflow_version``: ``<root>/pyspark-<version>-airflow-<version>``).

:func:`spark_env_python` makes ``<root>/pyspark-<version>`` (root: ``STREAMBED_SPARK_ENVS``, else
``<repository>/.venvs``) with this package installed editable with its test extras and exactly
that pyspark, the way ``make install`` makes the default one (its ``install_package`` recipe):
the Spark provider pulls ``pyspark-client``, whose files overwrite pyspark's, so it is
uninstalled and pyspark reinstalled, with the py4j its jars were built against (the steps a user
who installs another pyspark beside the provider takes too: README). pip's download and
wheel cache is used as usual (``PIP_CACHE_DIR``), so a second env of the same pyspark downloads
nothing. A later call finds the env by its stamp and returns at once; a change of
``pyproject.toml`` reinstalls the package into it.

What depends on the Spark line in the tests is here too: which pyspark reads cuts through
Iceberg's runtime and which jars that runtime is (:func:`iceberg_runtime_jars`), and what a
Spark Connect server of a line needs besides pyspark (:func:`connect_server_conf`).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

from airflow_provider_streambed.testing import jars

logger = logging.getLogger(__name__)

#: The variable naming where the envs are kept (default ``<repository>/.venvs``).
SPARK_ENVS_VARIABLE = "STREAMBED_SPARK_ENVS"
#: The pyspark the tests read cuts with through Iceberg's Spark runtime (Iceberg 1.12 has no
#: runtime for Spark 4.2; the one for 4.1 fails on 4.2 with ``IncompatibleClassChangeError``).
ICEBERG_RUNTIME_PYSPARK = "4.1.4"
#: The jars folder (:mod:`.jars`) of Iceberg's Spark runtime per Spark line, for the lines that have one.
ICEBERG_RUNTIME_FOLDERS = {"4.1": jars.ICEBERG_SPARK_4_1}
#: The stamp of a finished env: what it was made with (see :func:`_wanted_stamp`).
STAMP = ".installed"
REPOSITORY = Path(__file__).resolve().parents[2]


def spark_envs_dir() -> Path:
    """Where the envs are kept: ``STREAMBED_SPARK_ENVS``, else ``<repository>/.venvs``."""
    return Path(os.environ.get(SPARK_ENVS_VARIABLE) or REPOSITORY / ".venvs")


def spark_line(pyspark_version: str) -> str:
    """The Spark line of a pyspark version: ``"4.1"`` for ``"4.1.4"``."""
    return ".".join(pyspark_version.split(".")[:2])


def iceberg_runtime_jars(pyspark_version: str) -> str:
    """The value of ``spark.jars`` that gives pyspark ``pyspark_version`` Iceberg's Spark runtime
    and the PostgreSQL JDBC driver of its JDBC catalog.

    Raises:
        LookupError: Iceberg has no runtime for that Spark line (here).
        FileNotFoundError: the jars are not installed (``make install``).
    """
    folder = ICEBERG_RUNTIME_FOLDERS.get(spark_line(pyspark_version))
    if folder is None:
        raise LookupError(f"no Iceberg Spark runtime for Spark {spark_line(pyspark_version)} (pyspark "
                          f"{pyspark_version}); lines with one: {sorted(ICEBERG_RUNTIME_FOLDERS)}")
    return jars.spark_jars_conf(folder)


def connect_server_conf(pyspark_version: str) -> dict[str, str]:
    """The settings a Spark Connect server started from pyspark ``pyspark_version`` needs: on 3.5,
    whose pyspark has no Connect server, its jar (``.jars/spark-connect-3.5``, 3.5.7: the matrix's
    3.5 line is that release); nothing from 4.0 on."""
    return {"spark.jars": jars.spark_jars_conf(jars.SPARK_CONNECT_3_5)} if spark_line(pyspark_version) == "3.5" else {}


def spark_env_python(pyspark_version: str, root: Path | None = None, airflow_version: str | None = None) -> Path:
    """The python of a virtualenv with ``pyspark_version`` and this package, made first when missing
    (with ``airflow_version`` too, when given: ``pyspark-<version>-airflow-<version>``).

    Making one takes minutes (pyspark is a 300-450 MB download and wheel build, unless pip's
    cache has it, and the package's dependencies install anew); finding a made one takes
    milliseconds. Processes asking for the same env at once wait for one another (a file lock).

    Args:
        pyspark_version: an exact pyspark release, e.g. ``"4.1.4"``.
        airflow_version: an exact Airflow release (default: the newest pip finds for the package).
        root: where the envs are kept (default :func:`spark_envs_dir`).

    Raises:
        RuntimeError: a step failed (the message ends with its output), or the env's
            ``spark-submit`` is not of ``pyspark_version``.
    """
    name = f"pyspark-{pyspark_version}" + (f"-airflow-{airflow_version}" if airflow_version else "")
    env = (root or spark_envs_dir()) / name
    python = env / "bin" / "python"
    wanted = _wanted_stamp(pyspark_version, airflow_version)
    env.parent.mkdir(parents=True, exist_ok=True)
    with (env.parent / f"{env.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _stamp(env) == wanted:
            return python
        started = time.perf_counter()
        logger.info("making a virtualenv with pyspark %s in %s (minutes on a cold pip cache)", pyspark_version, env)
        _install(env, pyspark_version, airflow_version)
        (env / STAMP).write_text(json.dumps(wanted))
        logger.info("virtualenv with pyspark %s made in %.0f s", pyspark_version, time.perf_counter() - started)
    return python


def _install(env: Path, pyspark_version: str, airflow_version: str | None) -> None:
    """The steps of the Makefile's ``install_package`` recipe, with ``pyspark_version`` (and ``airflow_version``)."""
    python, pip = env / "bin" / "python", [str(env / "bin" / "python"), "-m", "pip", "install", "-q"]
    if not python.exists():
        _run([sys.executable, "-m", "venv", str(env)])
    _run([*pip, "--upgrade", "pip"])
    # The test extras; not spark-submit's, which pins the default pyspark.
    airflow = [f"apache-airflow=={airflow_version}"] if airflow_version else []
    _run([*pip, "-e", f"{REPOSITORY}[test]", f"pyspark=={pyspark_version}", *airflow])
    # pyspark-client (pulled by the spark provider) overwrites pyspark's files and, of another
    # line, leaves modules pyspark lacks (4.x's ``pyspark/sql/functions/`` shadows 3.5's
    # ``functions.py``): remove it with its files, then put pyspark's back.
    _run([str(python), "-m", "pip", "uninstall", "-q", "-y", "pyspark-client"])
    _run([*pip, "--force-reinstall", "--no-deps", f"pyspark=={pyspark_version}"])
    _run([*pip, "--no-deps", f"py4j=={_bundled_py4j(python)}"])
    version = subprocess.run([str(env / "bin" / "spark-submit"), "--version"], capture_output=True, text=True,
                             check=False, env={**os.environ, "PYSPARK_PYTHON": str(python)})
    if f"version {pyspark_version}" not in version.stdout + version.stderr:
        raise RuntimeError(f"spark-submit is broken in {env}: {(version.stdout + version.stderr)[-2000:]}")


def _bundled_py4j(python: Path) -> str:
    """The py4j version of the env's pyspark jars (its Python side must be the same)."""
    found = subprocess.run(
        [str(python), "-c", "import pathlib, pyspark; print(*sorted(p.name for p in "
         "(pathlib.Path(pyspark.__file__).parent / 'jars').glob('py4j-*.jar')))"],
        capture_output=True, text=True, check=True,
    ).stdout.split()
    if not found:
        raise RuntimeError(f"{python}: pyspark has no py4j jar")
    return found[0].removeprefix("py4j-").removesuffix(".jar")


def _wanted_stamp(pyspark_version: str, airflow_version: str | None = None) -> dict[str, str]:
    """What a finished env records: its pyspark and Airflow, its Python, and the ``pyproject.toml`` it installed."""
    pyproject = hashlib.sha256((REPOSITORY / "pyproject.toml").read_bytes()).hexdigest()
    return {"pyspark": pyspark_version, "airflow": airflow_version or "newest",
            "python": f"{sys.version_info.major}.{sys.version_info.minor}",
            "pyproject": pyproject}


def _stamp(env: Path) -> dict[str, str] | None:
    """The stamp of a finished env, ``None`` for an unfinished or missing one."""
    try:
        return dict(json.loads((env / STAMP).read_text()))
    except (FileNotFoundError, ValueError):
        return None


def _run(command: list[str]) -> None:
    """Run a step (its output only in the error when it fails).

    Raises:
        RuntimeError: the step failed; the message ends with its output.
    """
    logger.debug("running %s", command)
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed with exit code {done.returncode}:\n"
                           f"{(done.stdout + done.stderr)[-3000:]}")
