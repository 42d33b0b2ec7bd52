"""A cut's members by name (no catalog is opened)."""

from __future__ import annotations

import datetime as dt

import pytest
from pyiceberg.catalog.noop import NoopCatalog

from airflow_provider_streambed.exceptions import MemberNotFoundError, is_final
from airflow_provider_streambed.ledger.cuts import CutMember
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.read import Cut


def test_a_member_the_cut_does_not_hold_is_a_final_key_error() -> None:
    accounts = CutMember("accounts", "bank.accounts", 7, "file:///w/bank/accounts/metadata/v1.metadata.json")
    cut = Cut("bank", 3, Lsn(100), Lsn(50), dt.datetime(2026, 1, 1, tzinfo=dt.UTC), "run-3", {"accounts": accounts},
              NoopCatalog("lake"))
    assert cut.member("accounts") is accounts
    with pytest.raises(MemberNotFoundError, match="group 'bank', cut 3 has no member 'ledger'") as missing:
        cut.member("ledger")
    assert isinstance(missing.value, KeyError) and is_final(missing.value)
