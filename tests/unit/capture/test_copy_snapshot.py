"""Which decoded transactions a copy's snapshot holds: PostgreSQL's visibility rule on 32-bit xids."""

from __future__ import annotations

import pytest

from airflow_provider_streambed.capture.copy_snapshot import CopyFilter, CopySnapshot, xid_precedes

EPOCH = 1 << 32


def test_a_snapshot_holds_what_precedes_xmin_and_what_precedes_xmax_outside_xip() -> None:
    snapshot = CopySnapshot.parse("100:110:102,105")
    assert snapshot == CopySnapshot(100, 110, frozenset({102, 105}))
    assert [xid for xid in range(95, 115) if snapshot.holds(xid)] == [95, 96, 97, 98, 99, 100, 101, 103, 104, 106,
                                                                      107, 108, 109]
    assert not snapshot.holds(110) and not snapshot.holds(111)  # at or after xmax: not yet committed
    assert CopySnapshot.parse("7:7:") == CopySnapshot(7, 7) and not CopySnapshot(7, 7).holds(7)


@pytest.mark.parametrize("epoch", [0, 1, 5])
def test_the_rule_compares_modulo_2_to_the_32_across_wraparound(epoch: int) -> None:
    # xmin just below 2^32, xmax past it: the 32-bit xids wrapped to 3, 4, ... in between.
    xmin, xmax = (epoch + 1) * EPOCH - 5, (epoch + 1) * EPOCH + 10
    snapshot = CopySnapshot(xmin, xmax, frozenset({(epoch + 1) * EPOCH - 2, (epoch + 1) * EPOCH + 4}))
    assert snapshot.holds(EPOCH - 100) and snapshot.holds(EPOCH - 6)  # below xmin
    assert snapshot.holds(EPOCH - 5) and not snapshot.holds(EPOCH - 2) and snapshot.holds(EPOCH - 1)
    assert snapshot.holds(3) and not snapshot.holds(4) and snapshot.holds(9)  # wrapped, in xip or not
    assert not snapshot.holds(10) and not snapshot.holds(1000)  # at or after xmax
    assert snapshot.holds(EPOCH - (1 << 30))  # a quarter of the xid space back is still the past


def test_xid_precedes_is_postgresqls_circular_order() -> None:
    assert xid_precedes(3, 4) and not xid_precedes(4, 3) and not xid_precedes(4, 4)
    assert xid_precedes(EPOCH - 1, 3) and not xid_precedes(3, EPOCH - 1)  # 3 is after the wrap
    assert xid_precedes(5 * EPOCH + 3, 4)  # xid8 values are reduced to their 32 bits


def test_a_snapshot_reads_back_what_it_writes() -> None:
    snapshot = CopySnapshot(2 * EPOCH + 7, 2 * EPOCH + 20, frozenset({2 * EPOCH + 9, 2 * EPOCH + 8}))
    assert str(snapshot) == f"{2 * EPOCH + 7}:{2 * EPOCH + 20}:{2 * EPOCH + 8},{2 * EPOCH + 9}"
    assert CopySnapshot.parse(str(snapshot)) == snapshot


def test_a_filter_decides_per_transaction_and_counts_what_it_drops() -> None:
    copy = CopyFilter(CopySnapshot.parse("100:110:105"))
    assert not copy.drops()  # before any transaction
    copy.begin(101)
    assert copy.drops() and copy.drops()
    copy.begin(105)
    assert not copy.drops()
    copy.begin(110)
    assert not copy.drops()
    assert copy.dropped == 2
