"""Hooks resolve connections from ``AIRFLOW_CONN_*`` variables; no database, no secrets in logs."""

from __future__ import annotations

import json
import logging

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from airflow_provider_streambed.exceptions import ConnectionConfigError
from airflow_provider_streambed.hooks import source as source_module
from airflow_provider_streambed.hooks.catalog import StreambedCatalogHook
from airflow_provider_streambed.hooks.source import StreambedSourceHook


@pytest.fixture
def source_conn(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(
        "AIRFLOW_CONN_BANK_PG",
        json.dumps({"conn_type": "postgres", "host": "db.example", "port": 6543, "login": "capture",
                    "password": "s3cr3t-pw", "schema": "bank", "extra": {"sslmode": "require", "other": "x"}}),
    )
    return "bank_pg"


def test_source_hook_builds_conninfo_from_the_connection(source_conn: str) -> None:
    params = conninfo_to_dict(StreambedSourceHook(source_conn).conninfo)
    assert params == {"host": "db.example", "port": "6543", "user": "capture", "password": "s3cr3t-pw",
                      "dbname": "bank", "sslmode": "require"}


def test_source_hook_accepts_uri_connections(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_SRC", "postgresql://u:p%40ss@h:5432/d")
    assert conninfo_to_dict(StreambedSourceHook("src").conninfo)["password"] == "p@ss"


def test_source_hook_never_logs_the_dsn(source_conn: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    hook = StreambedSourceHook(source_conn)
    with pytest.raises(psycopg.OperationalError):
        # db.example does not resolve here: the connection fails, nothing secret is logged
        hook.get_conn()
    assert "s3cr3t-pw" not in caplog.text
    assert "bank_pg" in caplog.text


def test_source_hook_registers_the_password_and_dsn_with_the_masker(
    source_conn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What a real scheduled run logs is read in tests/integration/airflow/test_ui_real_airflow.py;
    # this checks that the hook hands both secrets to Airflow's (public) mask_secret.
    registered: list[str] = []
    monkeypatch.setattr(source_module, "mask_secret", registered.append)
    conninfo = StreambedSourceHook(source_conn).conninfo
    assert registered == ["s3cr3t-pw", conninfo]


def test_provider_attributes() -> None:
    assert (StreambedSourceHook.conn_type, StreambedSourceHook.conn_name_attr) == ("postgres", "source_conn_id")
    assert StreambedCatalogHook.conn_type == "streambed_catalog"
    assert StreambedCatalogHook.default_conn_name == "streambed_catalog_default"


def test_catalog_hook_with_uri_in_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_LAKE", json.dumps({
        "conn_type": "streambed_catalog",
        "extra": {"uri": "sqlite:////data/catalog.db", "warehouse": "file:///data/wh",
                  "properties": {"s3.endpoint": "http://minio:9000"}},
    }))
    assert StreambedCatalogHook("lake").properties == {
        "name": "streambed", "uri": "sqlite:////data/catalog.db", "warehouse": "file:///data/wh",
        "s3.endpoint": "http://minio:9000",
    }


def test_catalog_hook_builds_a_postgres_uri(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_LAKE", json.dumps({
        "conn_type": "streambed_catalog", "host": "catalog-db", "port": 5432, "login": "iceberg",
        "password": "p@ss/word", "schema": "catalog", "extra": {"warehouse": "s3://lake/wh", "catalog_name": "prod"},
    }))
    properties = StreambedCatalogHook("lake").properties
    assert properties["uri"] == "postgresql+psycopg://iceberg:p%40ss%2Fword@catalog-db:5432/catalog"
    assert (properties["name"], properties["warehouse"]) == ("prod", "s3://lake/wh")


@pytest.mark.parametrize(
    ("connection", "message"),
    [
        ({"conn_type": "streambed_catalog", "extra": {"uri": "sqlite:///x.db"}}, "extra 'warehouse'"),
        ({"conn_type": "streambed_catalog", "extra": {"warehouse": "file:///w"}}, "set extra 'uri'"),
    ],
)
def test_catalog_hook_names_the_missing_field(
    monkeypatch: pytest.MonkeyPatch, connection: dict[str, object], message: str
) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_LAKE", json.dumps(connection))
    with pytest.raises(ConnectionConfigError, match=f"catalog connection 'lake': .*{message}"):
        StreambedCatalogHook("lake").properties  # noqa: B018


def test_catalog_hook_opens_a_sqlite_catalog(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    from pathlib import Path

    assert isinstance(tmp_path, Path)
    monkeypatch.setenv("AIRFLOW_CONN_LAKE", json.dumps({
        "conn_type": "streambed_catalog",
        "extra": {"uri": f"sqlite:///{tmp_path / 'c.db'}", "warehouse": (tmp_path / "wh").as_uri()},
    }))
    catalog = StreambedCatalogHook("lake").get_conn()
    catalog.create_namespace("bank")
    assert ("bank",) in catalog.list_namespaces()


def test_an_iceberg_connection_reads_like_the_iceberg_providers_hook(monkeypatch: pytest.MonkeyPatch) -> None:
    extra = {"warehouse": "warehouse", "s3.endpoint": "http://seaweed:8333",
             "streambed.ledger-uri": "postgresql+psycopg://ledger:l3dger-pw@db/ledger",
             "streambed.staging-uri": "file:///shared/staging"}
    monkeypatch.setenv("AIRFLOW_CONN_REST", json.dumps({
        "conn_type": "iceberg", "host": "http://seaweed:8181/", "login": "client", "password": "cl13nt-secret",
        "extra": extra,
    }))
    masked: list[str] = []
    monkeypatch.setattr("airflow_provider_streambed.hooks.catalog.mask_secret", masked.append)
    assert StreambedCatalogHook("rest").properties == {
        **extra, "uri": "http://seaweed:8181", "type": "rest", "name": "rest", "credential": "client:cl13nt-secret",
    }
    assert {"cl13nt-secret", "client:cl13nt-secret", extra["streambed.ledger-uri"]} <= set(masked)
    monkeypatch.setenv("AIRFLOW_CONN_REST", json.dumps({"conn_type": "iceberg", "host": "http://seaweed:8181",
                                                        "extra": {"streambed.staging-uri": "file:///s"}}))
    with pytest.raises(ConnectionConfigError, match=r"connection 'rest' \(type 'iceberg'\): set extra "
                                                    r"'streambed.ledger-uri'"):
        StreambedCatalogHook("rest").properties  # noqa: B018
