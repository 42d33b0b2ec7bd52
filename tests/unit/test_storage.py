"""Object stores configured per location: which properties a URI gets, what a job spec may carry."""

from __future__ import annotations

from airflow_provider_streambed import storage

STORE = {"s3.endpoint": "http://10.0.0.1:8333", "s3.region": "eu-west-1", "s3.access-key-id": "AKIA",
         "s3.secret-access-key": "hush", "client.secret-access-key": "hush", "uri": "postgresql://u:pw@db/cat",
         "warehouse": "s3://lake/warehouse"}


def test_a_uri_under_a_configured_location_gets_its_store_and_nothing_but_store_properties() -> None:
    storage.configure("s3://lake/warehouse", STORE)
    assert storage.configured_properties("s3://lake/warehouse/ns/t/data/f.parquet") == {
        key: value for key, value in STORE.items() if key.startswith(("s3.", "client."))}
    assert storage.configured_properties("s3://lake/warehousex/f") != {}  # the one store of the scheme serves it


def test_the_longest_location_wins_and_two_stores_of_a_scheme_leave_other_uris_to_the_environment() -> None:
    storage.configure("s3://lake", {"s3.endpoint": "http://a"})
    storage.configure("s3://lake/staging", {"s3.endpoint": "http://b"})
    assert storage.configured_properties("s3://lake/staging/run/x")["s3.endpoint"] == "http://b"
    assert storage.configured_properties("s3://lake/other")["s3.endpoint"] == "http://a"
    assert storage.configured_properties("s3://elsewhere/x") == {}


def test_local_locations_are_not_configured() -> None:
    storage.configure("/data/warehouse", STORE)
    storage.configure("file:///data/warehouse", STORE)
    assert storage.configured_locations() == {}


def test_a_spec_carries_no_key_or_secret() -> None:
    storage.configure("s3://lake/warehouse", STORE)
    assert storage.configured_locations() == {
        "s3://lake/warehouse": {"s3.endpoint": "http://10.0.0.1:8333", "s3.region": "eu-west-1"}}


def test_the_drivers_environment_gets_the_configured_credentials() -> None:
    storage.configure("s3://lake/warehouse", STORE)
    assert storage.credential_environment("s3://lake/warehouse/_streambed/g/r/_job/spec.json") == {
        "AWS_ACCESS_KEY_ID": "AKIA", "AWS_SECRET_ACCESS_KEY": "hush", "AWS_REGION": "eu-west-1"}
    assert storage.credential_environment("/tmp/staging/spec.json") == {}
