"""``pip install airflow-provider-streambed`` without extras: no full pyspark, no spark-submit, and
a refresh through a Spark Connect server works from that fresh venv, as does one whose mirrors
merge in-process (no Spark at all)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import psycopg
import pytest

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent("""
    import sys
    import psycopg
    from airflow_provider_streambed import Mirror, RefreshGroup
    from airflow_provider_streambed.exceptions import RefreshError
    from airflow_provider_streambed.local import refresh_once
    from airflow_provider_streambed.read import CutReader

    dsn, catalog_uri, warehouse, remote = sys.argv[1:]
    group = RefreshGroup("slim", "src", "cat", "slim", [Mirror("public.items")])
    properties = {"uri": catalog_uri, "warehouse": warehouse}
    first = refresh_once(group, source_dsn=dsn, catalog_properties=properties, run_key="r0")  # the copy, as it is
    print("FIRST:", first.cut.cut_id)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO items VALUES (6)")
    by_spark = {"spark.streambed.mirror.inProcessMerge": "false"}
    try:  # changes merged by Spark need spark-submit, or a Spark Connect server
        refresh_once(group, source_dsn=dsn, catalog_properties=properties, run_key="r1", spark_conf=by_spark)
    except RefreshError as error:
        print("SUBMIT:", error)
    result = refresh_once(group, source_dsn=dsn, catalog_properties=properties, run_key="r1", spark_remote=remote,
                          spark_conf=by_spark)
    cut = CutReader(properties, group).get(result.cut.cut_id)
    rows = sorted(row["id"] for row in cut.to_arrow("items").to_pylist())
    print("CUT:", result.cut.cut_id, rows)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("UPDATE items SET id = 7 WHERE id = 6")
    result = refresh_once(group, source_dsn=dsn, catalog_properties=properties, run_key="r2")  # merged in-process
    cut = CutReader(properties, group).get(result.cut.cut_id)
    print("IN-PROCESS:", result.cut.cut_id, sorted(row["id"] for row in cut.to_arrow("items").to_pylist()))
""")


def test_a_plain_install_refreshes_through_spark_connect(pg_dsn: str, sqlite_catalog_uri: str, tmp_path: Path,
                                                         spark_connect_url: str) -> None:
    python = shutil.which("python3.11")
    assert python is not None
    venv = tmp_path / "venv"
    subprocess.run([python, "-m", "venv", str(venv)], check=True)
    # --no-compile: byte-compiling ~160 packages (Airflow's thousands of modules) took a third of the
    # install; the script below compiles what it imports
    installed = subprocess.run([str(venv / "bin/pip"), "install", "-q", "--no-compile", str(REPO)],
                               capture_output=True, text=True)
    assert installed.returncode == 0, installed.stderr[-2000:]
    packages = subprocess.run([str(venv / "bin/pip"), "list"], capture_output=True, text=True, check=True).stdout
    assert "pyspark-client" in packages and "\npyspark " not in packages
    assert not (venv / "bin/spark-submit").exists()

    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE items (id int PRIMARY KEY)")
        conn.execute("INSERT INTO items SELECT generate_series(1, 5)")
    script = tmp_path / "refresh.py"
    script.write_text(SCRIPT)
    # the fresh venv alone on PATH: make and CI put the development venv (with spark-submit) there
    environment = {name: value for name, value in os.environ.items()
                   if not name.startswith(("SPARK_", "PYSPARK_", "VIRTUAL_ENV", "PYTHONPATH"))}
    environment["PATH"] = os.pathsep.join([str(venv / "bin"), "/usr/local/bin", "/usr/bin", "/bin"])
    ran = subprocess.run(
        [str(venv / "bin/python"), str(script), pg_dsn, sqlite_catalog_uri, (tmp_path / "wh").as_uri(),
         spark_connect_url], capture_output=True, text=True, cwd=tmp_path, timeout=600, env=environment,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "SUBMIT: spark-submit is not installed here: install airflow-provider-streambed[spark-submit]" in ran.stdout
    assert "FIRST: 1" in ran.stdout and "CUT: 2 [1, 2, 3, 4, 5, 6]" in ran.stdout
    assert "IN-PROCESS: 3 [1, 2, 3, 4, 5, 7]" in ran.stdout  # a plain install merges mirrors without Spark


def test_the_package_builds_without_deprecation_warnings(tmp_path: Path) -> None:
    """The metadata stays buildable by setuptools past its deprecations (an SPDX ``license``)."""
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "-w", str(tmp_path), str(REPO)],
                           capture_output=True, text=True, check=True, timeout=600)
    warnings = [line.strip() for line in (built.stdout + built.stderr).splitlines() if "eprecat" in line]
    assert warnings == []
    with zipfile.ZipFile(next(tmp_path.glob("airflow_provider_streambed-*.whl"))) as wheel:
        metadata = wheel.read(next(name for name in wheel.namelist() if name.endswith(".dist-info/METADATA")))
    assert "License-Expression: Apache-2.0" in metadata.decode().splitlines()
