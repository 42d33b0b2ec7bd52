"""The object store as the Spark job sees it: S3A settings from the catalog's ``s3.*`` properties.

The one translation of storage for Spark (DESIGN section 19). URIs keep their canonical form
(``s3://bucket/key``) everywhere, in Spark too: the job maps the ``s3`` scheme to Hadoop's S3A
connector (``fs.s3.impl``) rather than rewriting URIs to ``s3a://``, so the paths Spark reports
(``_metadata.file_path``, which position deletes name) are the URIs the tables hold. The endpoint,
region and addressing come from the object-store properties the worker hands the job (``--store``
arguments under spark-submit: never a key or secret); credentials come from S3A's default chain in
each JVM: the driver's environment (which the launcher fills from the catalog connection, never
argv) and the executors' own (an instance role, the cluster's environment).

The settings are set on the job's session at run time (Spark builds each query's Hadoop
configuration from the session's), for spark-submit and Spark Connect alike; a setting the user's
Spark configuration holds wins. ``spark.streambed.s3.connector=native`` leaves ``s3://`` to the
platform's own connector (EMRFS on EMR, Databricks'); S3A's jars (``hadoop-aws`` matching Spark's
Hadoop, with the AWS SDK bundle) are the cluster's (docs/cluster.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from airflow_provider_streambed.exceptions import ConfigurationError

#: Spark setting: ``s3a`` (default: the job maps ``s3://`` to S3A) or ``native`` (the platform's).
CONNECTOR_CONF = "spark.streambed.s3.connector"
S3A = "s3a"
NATIVE = "native"
#: The job's argument naming one object-store property (``--store s3.endpoint=http://...``).
STORE_OPTION = "--store"
S3A_FILESYSTEM = "org.apache.hadoop.fs.s3a.S3AFileSystem"


def store_arguments(properties: Mapping[str, str]) -> list[str]:
    """The job's arguments handing it the object store's ``properties`` (public ones only: callers
    pass :func:`airflow_provider_streambed.storage.public_properties`)."""
    return [argument for key, value in sorted(properties.items()) for argument in (STORE_OPTION, f"{key}={value}")]


def parse_store(values: Sequence[str]) -> dict[str, str]:
    """The properties of ``--store key=value`` arguments (their values)."""
    return dict(value.split("=", 1) for value in values)


def s3a_settings(properties: Mapping[str, str], connector: str = S3A) -> dict[str, str]:
    """The Hadoop settings that let Spark read and write ``s3://`` URIs of the store ``properties``
    describe (pyiceberg's ``s3.endpoint``, ``s3.region``, ``s3.force-virtual-addressing``).

    Raises:
        ConfigurationError: ``connector`` is neither ``s3a`` nor ``native`` (final: a bad setting).
    """
    if connector == NATIVE:
        return {}
    if connector != S3A:
        raise ConfigurationError(f"Spark setting {CONNECTOR_CONF}={connector!r}: expected {S3A!r} or {NATIVE!r}")
    settings = {"fs.s3.impl": S3A_FILESYSTEM}
    if endpoint := properties.get("s3.endpoint"):
        virtual = str(properties.get("s3.force-virtual-addressing", "false")).lower() == "true"
        settings.update({"fs.s3a.endpoint": endpoint, "fs.s3a.path.style.access": str(not virtual).lower(),
                         "fs.s3a.connection.ssl.enabled": str(not endpoint.startswith("http://")).lower()})
    if region := properties.get("s3.region") or properties.get("client.region"):
        settings["fs.s3a.endpoint.region"] = region
    return settings


def unset_settings(settings: Mapping[str, str], configured: Mapping[str, str | None]) -> dict[str, str]:
    """The ``settings`` that the user's Spark configuration does not hold, as ``key`` or as
    ``spark.hadoop.<key>`` (``configured``: what the session says of each)."""
    return {key: value for key, value in settings.items()
            if configured.get(key) is None and configured.get(f"spark.hadoop.{key}") is None}
