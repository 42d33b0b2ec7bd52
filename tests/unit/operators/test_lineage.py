"""How datasets are named for OpenLineage (pure parts of ``operators/lineage``)."""

from __future__ import annotations

from airflow_provider_streambed.operators.lineage import source_datasets, storage_name, table_dataset


def test_tables_are_named_per_the_naming_spec() -> None:
    assert storage_name("file:///data/wh/bank/accounts") == ("file", "/data/wh/bank/accounts")
    assert storage_name("/data/wh/bank/accounts") == ("file", "/data/wh/bank/accounts")
    assert storage_name("s3://lake/wh/bank/accounts") == ("s3://lake", "wh/bank/accounts")
    assert storage_name("s3a://lake/wh/bank/accounts") == ("s3://lake", "wh/bank/accounts")
    assert storage_name("gs://lake/wh/t") == ("gs://lake", "wh/t")
    [source] = source_datasets("db.example", None, "shop", ["public.orders"])
    assert (source.namespace, source.name) == ("postgres://db.example:5432", "shop.public.orders")


def test_a_member_table_carries_its_identifier_snapshot_and_rows() -> None:
    dataset = table_dataset("s3://lake/wh/bank/accounts", "s3://lake/wh", "bank.accounts", snapshot_id=42, rows=7)
    assert (dataset.namespace, dataset.name) == ("s3://lake", "wh/bank/accounts")
    assert dataset.facets["symlinks"].identifiers[0].name == "bank.accounts"
    assert dataset.facets["version"].datasetVersion == "42"
    assert dataset.outputFacets["outputStatistics"].rowCount == 7
    assert "outputStatistics" not in table_dataset("file:///t", "file:///", "n.t", rows=-1).outputFacets  # unknown
