"""The Java parts of a real cluster that the tests hand to Spark: S3A, Iceberg's Spark runtime, Nessie.

``make install`` copies them from Maven Central into ``.jars/<folder>/`` of the repository (every
version pinned in ``java/pom.xml``); ``STREAMBED_JARS_DIR`` points elsewhere. A user's platform
ships its own (docs/cluster.md).
"""

from __future__ import annotations

import os
from pathlib import Path

#: Iceberg's Spark runtime for Spark 4.1 and the PostgreSQL JDBC driver of its JDBC catalog.
ICEBERG_SPARK_4_1 = "iceberg-spark-4.1"
#: Nessie's server (its ``runner`` jar).
NESSIE = "nessie"
#: Spark Connect's server for Spark 3.5 (from 4.0 on, pyspark's own jars hold it).
SPARK_CONNECT_3_5 = "spark-connect-3.5"


def jars_dir() -> Path:
    """Where ``make install`` put the jars (``STREAMBED_JARS_DIR``, else ``<repository>/.jars``)."""
    return Path(os.environ.get("STREAMBED_JARS_DIR") or Path(__file__).resolve().parents[2] / ".jars")


def jars(folder: str) -> list[Path]:
    """The jars of one folder, sorted by name.

    Raises:
        FileNotFoundError: the folder has no jar (``make install`` was not run, or not since
            java/pom.xml changed).
    """
    found = sorted((jars_dir() / folder).glob("*.jar"))
    if not found:
        raise FileNotFoundError(f"no jars in {jars_dir() / folder}: run 'make install' (java/pom.xml lists them)")
    return found


def s3a_folder(hadoop_version: str) -> str:
    """The folder of S3A (``hadoop-aws`` and its AWS SDK) for a Spark built with Hadoop ``hadoop_version``."""
    return "s3a-hadoop-" + ".".join(hadoop_version.split(".")[:2])


def hadoop_version_of(spark_home: Path) -> str:
    """The Hadoop version a Spark distribution (or pyspark's directory) carries, from its client jar.

    Raises:
        FileNotFoundError: no ``jars/hadoop-client-api-*.jar`` under ``spark_home``.
    """
    for jar in (spark_home / "jars").glob("hadoop-client-api-*.jar"):
        return jar.name.removeprefix("hadoop-client-api-").removesuffix(".jar")
    raise FileNotFoundError(f"{spark_home}/jars has no hadoop-client-api jar")


def spark_classpath_conf(*folders: str) -> dict[str, str]:
    """Spark settings putting the jars of ``folders`` on the driver's and the executors' class path.

    Every host of a test cluster sees the repository, as a platform's nodes carry its jars; the
    class path needs no copy, where ``spark.jars`` has each executor fetch every jar from the
    driver (the AWS SDK bundle alone is 650 MiB: ~30 s per application).
    """
    path = ":".join(str(jar) for folder in folders for jar in jars(folder))
    return {"spark.driver.extraClassPath": path, "spark.executor.extraClassPath": path}


def spark_jars_conf(*folders: str) -> str:
    """The value of ``spark.jars`` for the jars of ``folders`` (comma-separated paths): for jars a
    host does not carry; each executor fetches them from the driver (see :func:`spark_classpath_conf`)."""
    return ",".join(str(jar) for folder in folders for jar in jars(folder))
