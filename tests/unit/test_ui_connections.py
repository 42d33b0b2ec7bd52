"""The catalog connections the Streambed page finds in the environment (``AIRFLOW_CONN_*``)."""

from __future__ import annotations

import json

from airflow_provider_streambed.ui.connections import environment_catalog_ids

CATALOG = json.dumps({"conn_type": "streambed_catalog", "extra": {"uri": "sqlite:///catalog.db"}})


def test_catalog_connections_in_json_and_uri_form_are_found_and_others_are_not() -> None:
    environment = {
        "AIRFLOW_CONN_LAKEHOUSE": CATALOG,
        "AIRFLOW_CONN_SECOND_LAKE": "streambed-catalog://catalog-db:5432",  # a URI: Airflow reads '-' as '_'
        "AIRFLOW_CONN_BANK_PG": "postgresql://user:secret@db/bank",
        "AIRFLOW_CONN_SPARK": json.dumps({"conn_type": "spark", "host": "local[2]"}),
        "AIRFLOW_CONN_BROKEN": "{not json",
        "AIRFLOW_CONN_": CATALOG,  # no id
        "LAKEHOUSE": CATALOG,  # not a connection variable
    }
    assert environment_catalog_ids(environment) == ["lakehouse", "second_lake"]


def test_an_environment_without_connections_has_none() -> None:
    assert environment_catalog_ids({"PATH": "/usr/bin"}) == []
