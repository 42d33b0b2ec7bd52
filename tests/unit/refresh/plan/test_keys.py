"""The mirror key rule: a key that changed since the previous cut fails the member, as final."""

from __future__ import annotations

import pytest

from airflow_provider_streambed.exceptions import SchemaChangeError, is_final
from airflow_provider_streambed.refresh.plan.keys import check_mirror_key
from airflow_provider_streambed.staging import TableCapture


def capture(*columns: str, key: tuple[str, ...] = ("id",)) -> TableCapture:
    return TableCapture("m", "public.t", columns, key, ("file:///x.parquet",), 0)


def test_the_same_or_an_unknown_key_passes() -> None:
    check_mirror_key("g", capture("id", "v"), ("id",))
    check_mirror_key("g", capture("id", "v"), ())


def test_a_changed_key_is_refused_naming_table_and_fix() -> None:
    with pytest.raises(SchemaChangeError, match=r"group 'g', member 'm', table 'public.t': key changed from \['id'\] "
                                                r"to \['v'\]; .*`streambed resync --group g --member m`") as refused:
        check_mirror_key("g", capture("id", "v", key=("v",)), ("id",))
    assert is_final(refused.value)
