"""The bank with every kind of member (mirrors, SQL, PySpark), and what makes one of its cuts exact."""

from __future__ import annotations

from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.examples.bank import BALANCES_SQL
from airflow_provider_streambed.member_declarations import Mirror, PythonMember, SqlMember
from airflow_provider_streambed.read import Cut, CutReader
from tests.integration.airflow.bank import check_cut

SENDER_TOTALS = "airflow_provider_streambed.examples.bank_derived:sender_totals"


def bank_group(name: str) -> RefreshGroup:
    """The bank's mirrors with a derived SQL member and a PySpark member, in a namespace of their own.

    No example group has all three kinds (``dags/example_bank.py``: mirrors and SQL;
    ``dags/example_derived.py``: a mirror and PySpark), so this one joins them.
    """
    return RefreshGroup(
        name=name, source_conn_id="bank_pg", catalog_conn_id="lakehouse", namespace=name,
        members=(
            Mirror("public.accounts"),
            Mirror("public.transfers"),
            SqlMember("balances", BALANCES_SQL, sources=("accounts", "transfers")),
            PythonMember("sender_totals", SENDER_TOTALS, sources=("transfers",)),
        ),
    )


def check_exact(cut: Cut, journal: set[int]) -> set[int]:
    """Assert that ``cut`` is exact (the bank invariant, ``balances`` and ``sender_totals`` agreeing
    with the mirrors of the same cut, stamped with its W); returns the transfer ids it holds."""
    ids = check_cut(cut, journal)
    expected: dict[int, tuple[int, int]] = {}
    for row in cut.to_arrow("transfers").to_pylist():
        count, amount = expected.get(row["src"], (0, 0))
        expected[row["src"]] = (count + 1, amount + row["amount"])
    senders = cut.to_arrow("sender_totals").to_pylist()
    assert {row["src"]: (row["transfers_sent"], row["amount_sent"]) for row in senders} == expected, \
        f"cut {cut.cut_id}: sender_totals disagrees with its transfers"
    assert {row["watermark_lsn"] for row in senders} <= {str(cut.watermark)}
    return ids


def check_cuts(properties: dict[str, str], group: RefreshGroup, journal: set[int], count: int) -> set[int]:
    """Assert that the group has cuts 1..``count``, each exact and holding the one before; returns
    the transfer ids of the last."""
    cuts = CutReader(properties, group).list()
    assert [cut.cut_id for cut in cuts] == list(range(1, count + 1))
    held: set[int] = set()
    for cut in cuts:
        ids = check_exact(cut, journal)
        assert held <= ids, f"cut {cut.cut_id} lost transfers of the cut before"
        held = ids
    return held
