"""The mirror schema rules, on Spark schemas alone: added columns pass, every other change is refused."""

from __future__ import annotations

import pytest
from pyspark.sql.types import DecimalType, LongType, StringType, StructField, StructType

from airflow_provider_streambed.exceptions import RefreshError, SchemaChangeError
from airflow_provider_streambed.refresh.schema import check_mirror_schema
from airflow_provider_streambed.staging import COMMIT_LSN, OP, SEQ, TableCapture

WHERE = "group 'g', member 'm', table 'public.t'"
BOOKKEEPING = [StructField(COMMIT_LSN, LongType()), StructField(SEQ, LongType()), StructField(OP, StringType())]
PREVIOUS = StructType([StructField("id", LongType()), StructField("v", StringType())])


def capture(*columns: str, key: tuple[str, ...] = ("id",)) -> TableCapture:
    return TableCapture("m", "public.t", columns, key, ("file:///x.parquet",), 0)


def changelog(*fields: StructField) -> StructType:
    return StructType([*BOOKKEEPING, *fields])


def test_unchanged_and_added_columns_pass() -> None:
    same = changelog(*PREVIOUS.fields)
    check_mirror_schema(WHERE, PREVIOUS, same, capture("id", "v"), ("id",))
    check_mirror_schema(WHERE, None, same, capture("id", "v"), ())
    wider = changelog(*PREVIOUS.fields, StructField("w", DecimalType(10, 2)))
    check_mirror_schema(WHERE, PREVIOUS, wider, capture("id", "v", "w"), ("id",))


@pytest.mark.parametrize(
    ("fields", "columns", "key", "error", "message"),
    [
        ([StructField("id", LongType())], ("id",), ("id",), SchemaChangeError,
         r"table 'public.t': column 'v' was dropped from the source table$"),
        ([StructField("id", LongType()), StructField("v", LongType())], ("id", "v"), ("id",), SchemaChangeError,
         r"column 'v' changed type from string to bigint"),
        ([*PREVIOUS.fields], ("id", "v"), ("v",), SchemaChangeError, r"key changed from \['id'\] to \['v'\]"),
        ([*PREVIOUS.fields], ("id",), ("id",), SchemaChangeError, r"column 'v' was dropped .* during the run"),
        ([StructField("id", LongType())], ("id", "v"), ("id",), RefreshError, r"segments lack columns \['v'\]"),
    ],
)
def test_other_changes_are_refused_naming_table_and_column(
    fields: list[StructField], columns: tuple[str, ...], key: tuple[str, ...], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        check_mirror_schema(WHERE, PREVIOUS, changelog(*fields), capture(*columns, key=key), ("id",))
