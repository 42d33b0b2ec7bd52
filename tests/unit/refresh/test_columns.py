"""The column changes a mirror cannot follow are refused when the run is planned, as final errors."""

from __future__ import annotations

import pytest

from airflow_provider_streambed.exceptions import SchemaChangeError, is_final
from airflow_provider_streambed.refresh.columns import check_mirror_columns
from airflow_provider_streambed.staging import TableCapture


def capture(columns: tuple[str, ...], filled: tuple[str, ...] = ()) -> TableCapture:
    return TableCapture("accounts", "public.accounts", columns, ("id",), ("file:///c.parquet",), 1,
                        filled_columns=filled)


def test_added_columns_without_a_catalog_default_and_unchanged_columns_pass() -> None:
    check_mirror_columns("bank", capture(("id", "balance")), ["id", "balance"])
    check_mirror_columns("bank", capture(("id", "balance", "tier")), ["id", "balance"])
    check_mirror_columns("bank", capture(("id", "region"), filled=("region",)), ["id", "region"])  # in the mirror


@pytest.mark.parametrize(
    ("now", "filled", "message"),
    [
        (("id",), (), r"columns \['balance'\] were dropped or renamed; the mirror cannot follow"),
        (("id", "amount"), (), r"columns \['balance'\] were dropped or renamed"),
        (("id", "balance", "region"), ("region",), r"columns \['region'\] were added with a DEFAULT"),
    ],
)
def test_a_dropped_renamed_or_defaulted_column_is_refused_as_final(
    now: tuple[str, ...], filled: tuple[str, ...], message: str
) -> None:
    with pytest.raises(SchemaChangeError, match=r"group 'bank', member 'accounts': source table public.accounts: "
                       + message + r".*Param 'resync_members' \['accounts'\] \(or run `streambed resync --group bank "
                       r"--member accounts`\)") as refused:
        check_mirror_columns("bank", capture(now, filled), ["id", "balance"])
    assert is_final(refused.value)
