"""Which members a run computes and which carry their previous snapshot (pure planning)."""

from __future__ import annotations

from airflow_provider_streambed import Mirror, PythonMember, RefreshGroup, SqlMember
from airflow_provider_streambed.refresh.plan.work import PreviousMember, definition_digest, plan_work
from airflow_provider_streambed.staging import TableCapture

GROUP = RefreshGroup(
    name="bank", source_conn_id="pg", catalog_conn_id="lake", namespace="bank",
    members=[
        Mirror("public.accounts"),
        Mirror("public.transfers"),
        SqlMember("balances", "SELECT * FROM accounts JOIN transfers ON true", sources=["accounts", "Transfers"]),
        PythonMember("daily", "mypkg.jobs:daily", sources=["transfers"]),
        SqlMember("report", "SELECT * FROM daily", sources=["daily"]),
    ],
)
COLUMNS = {"accounts": ("id", "balance"), "transfers": ("id", "src", "dst", "amount")}


def capture(member: str, changes: int = 0, bootstrap: bool = False, columns: tuple[str, ...] = ()) -> TableCapture:
    return TableCapture(member, f"public.{member}", columns or COLUMNS[member], ("id",), ("f.parquet",), changes,
                        ("copy-000-000.parquet",) if bootstrap else ())


def previous(**overrides: PreviousMember) -> dict[str, PreviousMember]:
    known = {m.name: PreviousMember(definition_digest(m), COLUMNS.get(m.name, ("x",))) for m in GROUP.members}
    return {**known, **overrides}


def computed(work: dict[str, object]) -> list[str]:
    return [name for name, planned in work.items() if planned.compute]  # type: ignore[attr-defined]


def test_no_change_carries_every_member() -> None:
    work = plan_work(GROUP, {"accounts": capture("accounts"), "transfers": capture("transfers")}, previous())
    assert computed(work) == []
    assert work["accounts"].reason == "no change to public.accounts"
    assert work["balances"].reason == "sources accounts, Transfers unchanged"


def test_a_changed_table_recomputes_its_mirror_and_what_reads_it_transitively() -> None:
    work = plan_work(GROUP, {"accounts": capture("accounts"), "transfers": capture("transfers", changes=3)},
                     previous())
    assert computed(work) == ["transfers", "balances", "daily", "report"]
    assert work["transfers"].reason == "3 changes in the changelog"
    assert work["balances"].reason == "sources Transfers recomputed"
    assert work["report"].reason == "sources daily recomputed"
    assert not work["accounts"].compute


def test_first_cut_bootstrap_definition_and_column_changes_recompute() -> None:
    captures = {"accounts": capture("accounts", bootstrap=True), "transfers": capture("transfers")}
    assert computed(plan_work(GROUP, captures, {})) == ["accounts", "transfers", "balances", "daily", "report"]
    work = plan_work(GROUP, captures, previous())
    assert work["accounts"].reason == "bootstrap copy" and not work["transfers"].compute

    quiet = {"accounts": capture("accounts"), "transfers": capture("transfers", columns=("id", "src", "dst", "amount",
                                                                                          "memo"))}
    work = plan_work(GROUP, quiet, previous(daily=PreviousMember("0" * 16, ("x",))))
    assert work["transfers"].reason == "the source table's columns changed"
    assert work["daily"].reason == "its definition changed"
    old = plan_work(GROUP, quiet, previous(accounts=PreviousMember(None, COLUMNS["accounts"])))
    assert old["accounts"].reason == "its snapshot records no definition (made by an older release)"


def test_the_digest_follows_the_definition() -> None:
    one = SqlMember("balances", "SELECT 1", sources=["accounts"])
    assert definition_digest(one) == definition_digest(SqlMember("balances", "SELECT 1", sources=["accounts"]))
    assert definition_digest(one) != definition_digest(SqlMember("balances", "SELECT 2", sources=["accounts"]))
    assert definition_digest(Mirror("a")) != definition_digest(Mirror("a", append_only=True))
    # how a mirror is stored does not change its rows: no recompute when a threshold is tuned
    assert definition_digest(Mirror("a")) == definition_digest(Mirror("a", compact_deleted_ratio=0.3,
                                                                      compact_max_files=10))


def test_a_derived_member_recomputed_for_its_sources_may_update_its_previous_snapshot() -> None:
    changed = {"accounts": capture("accounts"), "transfers": capture("transfers", changes=3)}
    work = plan_work(GROUP, changed, previous())
    assert [name for name, planned in work.items() if planned.on_previous] == ["balances", "daily", "report"]
    assert not plan_work(GROUP, changed, {})["daily"].on_previous  # first cut: whole
    assert not plan_work(GROUP, changed, previous(daily=PreviousMember("0" * 16, ("x",))))["daily"].on_previous
    # being incremental is how the rows are computed, not what they are: switching it recomputes nothing
    assert definition_digest(PythonMember("daily", "mypkg.jobs:daily", sources=["transfers"])) == definition_digest(
        PythonMember("daily", "mypkg.jobs:daily", sources=["transfers"], incremental=True))
