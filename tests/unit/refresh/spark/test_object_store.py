"""The one translation of the object store for Spark: S3A settings, the job's --store arguments."""

from __future__ import annotations

import pytest

from airflow_provider_streambed.exceptions import ConfigurationError, is_final
from airflow_provider_streambed.refresh.spark.object_store import (
    NATIVE,
    parse_store,
    s3a_settings,
    store_arguments,
    unset_settings,
)


def test_an_s3_compatible_store_is_reached_by_path_over_its_endpoint() -> None:
    assert s3a_settings({"s3.endpoint": "http://10.0.0.1:8333", "s3.region": "us-east-1"}) == {
        "fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
        "fs.s3a.endpoint": "http://10.0.0.1:8333",
        "fs.s3a.path.style.access": "true",
        "fs.s3a.connection.ssl.enabled": "false",
        "fs.s3a.endpoint.region": "us-east-1",
    }


def test_aws_itself_needs_only_the_scheme_mapped_and_virtual_addressing_is_kept() -> None:
    assert s3a_settings({}) == {"fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem"}
    virtual = s3a_settings({"s3.endpoint": "https://s3.example", "s3.force-virtual-addressing": "true"})
    assert virtual["fs.s3a.path.style.access"] == "false" and virtual["fs.s3a.connection.ssl.enabled"] == "true"


def test_the_platforms_own_connector_gets_no_setting_and_a_bad_choice_is_final() -> None:
    assert s3a_settings({"s3.endpoint": "http://x"}, NATIVE) == {}
    with pytest.raises(ConfigurationError, match=r"spark\.streambed\.s3\.connector='emrfs'") as raised:
        s3a_settings({}, "emrfs")
    assert is_final(raised.value)


def test_what_the_users_spark_configuration_holds_wins() -> None:
    settings = {"fs.s3a.endpoint": "http://ours", "fs.s3a.endpoint.region": "us-east-1", "fs.s3.impl": "S3A"}
    configured = {"spark.hadoop.fs.s3a.endpoint": "http://theirs", "fs.s3.impl": "EmrFileSystem"}
    assert unset_settings(settings, configured) == {"fs.s3a.endpoint.region": "us-east-1"}


def test_the_store_arguments_round_trip() -> None:
    properties = {"s3.endpoint": "http://h:1/x=y", "s3.region": "r"}
    arguments = store_arguments(properties)
    assert arguments == ["--store", "s3.endpoint=http://h:1/x=y", "--store", "s3.region=r"]
    assert parse_store(arguments[1::2]) == properties
