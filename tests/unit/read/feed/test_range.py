"""The change feed refuses cuts of two groups and cuts in the wrong order before reading anything."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pytest
from pyiceberg.table import StaticTable

from airflow_provider_streambed.exceptions import ChangeFeedError
from airflow_provider_streambed.ledger import CutMember, Ledger
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.read.feed import check_range


@dataclass(frozen=True)
class FakeCut:
    group: str
    cut_id: int
    watermark: Lsn = field(default_factory=lambda: Lsn(1))
    members: Mapping[str, CutMember] = field(default_factory=dict)

    def table(self, name: str) -> StaticTable:
        raise AssertionError(f"read {name}: nothing is read before the range is checked")


def test_cuts_of_two_groups_or_in_the_wrong_order_are_refused() -> None:
    ledger = Ledger("sqlite://")
    with pytest.raises(ChangeFeedError, match="cuts of two groups: 'bank' cut 3 and 'other' cut 1"):
        check_range(FakeCut("other", 1), FakeCut("bank", 3), ledger)
    with pytest.raises(ChangeFeedError, match=r"cut 2.changes_since\(cut 5\): the argument must be the earlier cut"):
        check_range(FakeCut("bank", 5), FakeCut("bank", 2), ledger)
