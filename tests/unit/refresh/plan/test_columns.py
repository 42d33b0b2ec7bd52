"""The column changes a mirror cannot follow are refused when the run is planned, as final errors."""

from __future__ import annotations

import dataclasses

import pytest

from airflow_provider_streambed.exceptions import SchemaChangeError, is_final
from airflow_provider_streambed.refresh.plan.columns import check_mirror_columns
from airflow_provider_streambed.staging import TableCapture


def capture(columns: tuple[str, ...], filled: tuple[str, ...] = ()) -> TableCapture:
    return TableCapture("accounts", "public.accounts", columns, ("id",), ("file:///c.parquet",), 1,
                        filled_columns=filled)


def test_columns_the_mirror_follows_in_place_pass() -> None:
    check_mirror_columns("bank", capture(("id", "balance")), ["id", "balance"])
    check_mirror_columns("bank", capture(("id", "balance", "tier")), ["id", "balance"])
    check_mirror_columns("bank", capture(("id", "region"), filled=("region",)), ["id", "region"])  # in the mirror
    check_mirror_columns("bank", capture(("id",)), ["id", "balance"])  # dropped
    renamed = capture(("id", "total"), filled=("total",))
    check_mirror_columns("bank", dataclasses.replace(renamed, renamed={"balance": "total"}), ["id", "balance"])


def test_a_defaulted_column_is_refused_as_final() -> None:
    message = r"columns \['region'\] were added with a DEFAULT"
    with pytest.raises(SchemaChangeError, match=r"group 'bank', member 'accounts': source table public.accounts: "
                       + message + r".*Param 'resync_members' \['accounts'\] \(or run `streambed resync --group bank "
                       r"--member accounts`\)") as refused:
        check_mirror_columns("bank", capture(("id", "balance", "region"), ("region",)), ["id", "balance"])
    assert is_final(refused.value)
