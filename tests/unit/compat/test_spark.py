"""The Spark lines: parsing a session's version, and the final error for a type a line cannot read."""

from __future__ import annotations

import pyarrow as pa
import pytest

from airflow_provider_streambed.compat.spark import SparkLine, check_columns, time_columns
from airflow_provider_streambed.exceptions import FinalRefreshError, is_final

SCHEMA = pa.schema([("id", pa.int64()), ("at", pa.time64("us")), ("on", pa.date32()), ("t2", pa.time64("us"))])


@pytest.mark.parametrize(("version", "release"), [("3.5.9", (3, 5)), ("3.5.1-amzn-0", (3, 5)), ("4.3.0", (4, 3)),
                                                  ("4.2.0-SNAPSHOT", (4, 2))])
def test_a_vendor_suffix_does_not_hide_the_release(version: str, release: tuple[int, int]) -> None:
    assert SparkLine(version).release == release


def test_the_time_type_and_the_tested_range_by_line() -> None:
    assert [SparkLine(v).has_time_type for v in ("3.5.9", "4.0.5", "4.1.4", "4.3.0")] == [False, False, True, True]
    assert [SparkLine(v).supported for v in ("3.4.4", "3.5.0", "4.3.1", "4.4.0")] == [False, True, True, False]
    assert "no time type" in SparkLine("3.5.9").describe()
    assert SparkLine("4.2.0").describe() == "Spark 4.2.0"
    assert "outside the tested range 3.5-4.3" in SparkLine("4.4.0").describe()
    with pytest.raises(ValueError, match="not a Spark version"):
        _ = SparkLine("dev").release


def test_a_time_column_on_a_spark_without_the_type_is_final_and_names_column_version_and_fix() -> None:
    assert time_columns(SCHEMA) == ["at", "t2"]
    with pytest.raises(FinalRefreshError) as refused:
        check_columns(SparkLine("3.5.1-amzn-0"), SCHEMA, "mirror 'readings'", "public.readings")
    message = str(refused.value)
    assert is_final(refused.value)
    for named in ("column 'at' of mirror 'readings'", "Spark 3.5.1-amzn-0", "['at', 't2']", "4.1 or later",
                  "ALTER TABLE public.readings ALTER COLUMN at TYPE text"):
        assert named in message, named
    check_columns(SparkLine("4.1.4"), SCHEMA, "mirror 'readings'", "public.readings")
    check_columns(SparkLine("3.5.9"), pa.schema([("id", pa.int64())]), "mirror 'readings'", "public.readings")
