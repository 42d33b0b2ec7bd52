"""Which Iceberg catalog of a Spark session serves the group's catalog, from its settings alone (no Spark)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, cast

import pytest
from pyiceberg.catalog.sql import SqlCatalog

from airflow_provider_streambed.catalog import open_catalog
from airflow_provider_streambed.exceptions import ConfigurationError
from airflow_provider_streambed.read.iceberg_runtime import (
    database_of,
    iceberg_catalogs,
    jdbc_catalog_conf,
    serving_catalog,
    spark_identifier,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SPARK_CATALOG = "org.apache.iceberg.spark.SparkCatalog"


class FakeConf:
    def __init__(self, settings: Mapping[str, str]) -> None:
        self.settings = settings

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.settings.get(key, default)


class FakeSpark:
    """What the module asks a session: ``SET`` (the keys, a password redacted) and ``spark.conf``."""

    def __init__(self, settings: Mapping[str, str]) -> None:
        self.conf = FakeConf(settings)
        self.settings = settings

    def sql(self, query: str) -> FakeSpark:
        assert query == "SET"
        return self

    def collect(self) -> list[tuple[str, str]]:
        return [(key, "*********(redacted)" if "password" in value else value) for key, value in self.settings.items()]


def session(settings: Mapping[str, str]) -> SparkSession:
    """A stand-in session with these settings."""
    return cast("SparkSession", FakeSpark(settings))


@pytest.fixture
def catalog(tmp_path: Path) -> SqlCatalog:
    opened = open_catalog({"uri": f"sqlite:///{tmp_path}/lake.db", "warehouse": (tmp_path / "w").as_uri()})
    assert isinstance(opened, SqlCatalog)
    return opened


def jdbc(name: str, uri: str, warehouse: str = "file:///w") -> dict[str, str]:
    prefix = f"spark.sql.catalog.{name}"
    return {prefix: SPARK_CATALOG, f"{prefix}.type": "jdbc", f"{prefix}.uri": uri, f"{prefix}.warehouse": warehouse}


@pytest.mark.parametrize(("first", "second", "same"), [
    ("postgresql+psycopg://u@localhost/lake", "jdbc:postgresql://127.0.0.1:5432/lake?user=u", True),
    ("postgresql://u:secret@db.example:6000/lake", "jdbc:postgresql://DB.example:6000/lake", True),
    ("postgresql://u@db/lake", "jdbc:postgresql://db/other", False),
    ("postgresql://u@db:5433/lake", "jdbc:postgresql://db/lake", False),
    ("postgresql://u@localhost/lake", "jdbc:postgresql:lake", True),
    ("sqlite:////data/catalog.db", "jdbc:sqlite:/data/catalog.db", True),
    ("sqlite:////data/catalog.db", "jdbc:sqlite:file:/data/catalog.db?journal_mode=WAL", True),
    ("sqlite:////data/catalog.db", "jdbc:sqlite:/data/other.db", False),
], ids=["loopback", "port-and-case", "database", "port", "no-host", "sqlite", "sqlite-file", "sqlite-other"])
def test_a_jdbc_url_and_an_sqlalchemy_uri_name_the_same_database(first: str, second: str, same: bool) -> None:
    assert (database_of(first) == database_of(second)) == same
    assert database_of(first)


def test_only_postgresql_and_sqlite_databases_are_known() -> None:
    assert database_of("mysql://u@db/lake") == database_of("not a uri") == database_of("jdbc:mysql://db/lake") == ()


def test_the_iceberg_catalog_named_like_the_group_s_catalog_on_its_database_serves_it(
    catalog: SqlCatalog, tmp_path: Path
) -> None:
    settings = {**jdbc("streambed", f"jdbc:sqlite:{tmp_path}/lake.db"), **jdbc("other", f"jdbc:sqlite:{tmp_path}/x.db"),
                "spark.sql.catalog.plain": "org.example.NotIceberg", "spark.sql.shuffle.partitions": "4"}
    spark = session(settings)
    assert set(iceberg_catalogs(spark)) == {"streambed", "other"}
    assert serving_catalog(spark, catalog) == "streambed"
    elsewhere = session(jdbc("streambed", f"jdbc:sqlite:/mnt/{tmp_path.name}/lake.db"))  # another path to it?
    assert serving_catalog(elsewhere, catalog) is None
    assert serving_catalog(elsewhere, catalog, "streambed") == "streambed"  # asked for: its uri is not checked


def test_a_jdbc_catalog_under_another_name_does_not_serve_and_says_why(
    catalog: SqlCatalog, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    spark = session(jdbc("lake", f"jdbc:sqlite:file:{tmp_path}/lake.db"))
    caplog.set_level("INFO", logger="airflow_provider_streambed.read.iceberg_runtime")
    assert serving_catalog(spark, catalog) is None
    assert "name it 'streambed' to read cuts through it" in caplog.text
    with pytest.raises(ConfigurationError, match="reads only the tables of catalog name 'lake': name it 'streambed'"):
        serving_catalog(spark, catalog, "lake")
    with pytest.raises(ConfigurationError, match="Spark catalog 'nope' is not an Iceberg catalog of the session"):
        serving_catalog(spark, catalog, "nope")


def test_a_catalog_implementation_class_counts_as_its_type_and_a_redacted_uri_is_read_from_the_conf(
    catalog: SqlCatalog, tmp_path: Path
) -> None:
    prefix = "spark.sql.catalog.streambed"
    spark = session({prefix: SPARK_CATALOG, f"{prefix}.catalog-impl": "org.apache.iceberg.jdbc.JdbcCatalog",
                       f"{prefix}.uri": f"jdbc:sqlite:{tmp_path}/lake.db?password=x"})
    assert serving_catalog(spark, catalog) == "streambed"


def test_the_jdbc_settings_of_a_catalog_carry_its_user_and_never_its_password(tmp_path: Path) -> None:
    props = {"uri": "postgresql+psycopg://reader:secret@db:6000/lake", "warehouse": "s3://bucket/w"}
    conf = jdbc_catalog_conf(props)
    assert conf == {**jdbc("streambed", "jdbc:postgresql://db:6000/lake", "s3://bucket/w"),
                    "spark.sql.catalog.streambed.jdbc.user": "reader"}
    assert "secret" not in repr(conf)
    assert jdbc_catalog_conf({"uri": f"sqlite:///{tmp_path}/c.db", "warehouse": "file:///w", "name": "lake"}) == \
        jdbc("lake", f"jdbc:sqlite:{tmp_path}/c.db")
    with pytest.raises(ConfigurationError, match="names a mysql database"):
        jdbc_catalog_conf({"uri": "mysql://u@db/lake", "warehouse": "file:///w"})


def test_spark_identifiers_are_quoted_part_by_part() -> None:
    assert spark_identifier("streambed", "ns", "odd`name") == "`streambed`.`ns`.`odd``name`"
