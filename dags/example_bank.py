"""Example: a bank whose accounts and transfers are published as transaction-consistent cuts.

Every cut of the ``bank`` group holds both tables at one source watermark, so the total money
over ``accounts`` never changes between cuts, and ``balances`` always agrees with the mirrored
tables of the same cut.
"""

from __future__ import annotations

from airflow_provider_streambed import Mirror, RefreshGroup, SqlMember

# [START bank_group]
bank = RefreshGroup(
    name="bank",
    source_conn_id="bank_pg",
    catalog_conn_id="lakehouse",
    namespace="bank",
    members=[
        Mirror("public.accounts"),
        Mirror("public.transfers"),
        SqlMember(
            "balances",
            "SELECT a.id, a.balance, "
            "coalesce(sum(CASE WHEN t.dst = a.id THEN t.amount ELSE 0 END), 0) "
            "- coalesce(sum(CASE WHEN t.src = a.id THEN t.amount ELSE 0 END), 0) AS net_transfers "
            "FROM accounts a LEFT JOIN transfers t ON t.src = a.id OR t.dst = a.id "
            "GROUP BY a.id, a.balance",
            sources=["accounts", "transfers"],
        ),
    ],
)
# [END bank_group]
