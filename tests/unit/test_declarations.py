from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_streambed import Mirror, PythonMember, RefreshGroup, SqlMember
from airflow_provider_streambed.exceptions import DeclarationError, MemberNotFoundError, is_final


def make_group(*members: Any, **overrides: Any) -> RefreshGroup:
    settings: dict[str, Any] = {
        "name": "bank",
        "source_conn_id": "bank_pg",
        "catalog_conn_id": "lakehouse",
        "namespace": "bank",
        "members": list(members),
    }
    return RefreshGroup(**{**settings, **overrides})


def test_the_documented_example_declares() -> None:
    bank = make_group(
        Mirror("public.accounts"),
        Mirror("public.transfers", name="transfers"),
        SqlMember("balances", "SELECT a.id, a.balance FROM accounts a", sources=["accounts"]),
        PythonMember("daily", "mypkg.jobs:daily", sources=["transfers"]),
    )
    assert [m.name for m in bank.members] == ["accounts", "transfers", "balances", "daily"]
    assert isinstance(bank.members, tuple)
    assert bank.members[2].sources == ("accounts",)
    assert [m.name for m in bank.mirrors] == ["accounts", "transfers"]


def test_topological_order_follows_dependencies_then_declaration_order() -> None:
    group = make_group(
        SqlMember("report", "SELECT * FROM balances JOIN daily", sources=["balances", "daily"]),
        PythonMember("daily", "jobs:daily", sources=["transfers"]),
        SqlMember("balances", "SELECT * FROM accounts", sources=["accounts"]),
        Mirror("transfers"),
        Mirror("accounts"),
    )
    order = [m.name for m in group.topological_members()]
    assert order == ["transfers", "daily", "accounts", "balances", "report"]


@pytest.mark.parametrize(
    ("members", "overrides", "message"),
    [
        ([], {}, r"group 'bank' has no members"),
        ([Mirror("a")], {"name": "Bank"}, r"group name 'Bank' is invalid"),
        ([Mirror("a")], {"name": "x" * 41}, r"group name 'x{41}' is invalid"),
        ([Mirror("a")], {"source_conn_id": ""}, r"group 'bank': source_conn_id '' must be a non-empty connection id"),
        ([Mirror("a")], {"catalog_conn_id": " lake"}, r"group 'bank': catalog_conn_id ' lake'"),
        ([Mirror("a")], {"namespace": "bank.raw"}, r"group 'bank', namespace: 'bank.raw' is not a valid identifier"),
        ([Mirror("a")], {"atomicity": "eventual"}, r"group 'bank': atomicity 'eventual' must be one of"),
        ([Mirror("a")], {"on_schema_change": "ignore"}, r"group 'bank': on_schema_change 'ignore' must be one of"),
        ([Mirror("a"), Mirror("b", name="A")], {}, r"group 'bank', member 'A': duplicate member name"),
        ([Mirror("a"), Mirror("public.a", name="a2")], {}, r"member 'a2': source table 'public.a' is mirrored twice"),
        ([SqlMember("t", "SELECT 1", sources=["ledgr"])], {}, r"group 'bank', member 't': unknown source 'ledgr'"),
        ([SqlMember("t", "SELECT 1", sources=["t"])], {},
         r"group 'bank': members depend on each other in a cycle: t -> t"),
        (
            [SqlMember("x", "SELECT 1", sources=["y"]), SqlMember("y", "SELECT 1", sources=["x"])],
            {},
            r"cycle: (x -> y -> x|y -> x -> y)",
        ),
        (["accounts"], {}, r"group 'bank': 'accounts' is not a Mirror, SqlMember or PythonMember"),
        ("accounts", {}, r"group 'bank': members must be a list"),
    ],
)
def test_group_errors_name_group_and_member(members: Any, overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(DeclarationError, match=message):
        make_group(*members, **overrides) if isinstance(members, list) else make_group(**{"members": members})


def test_declaration_error_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="has no members"):
        make_group()


def test_round_trip_through_dict() -> None:
    group = make_group(
        Mirror("public.accounts"),
        Mirror("events", append_only=True),
        SqlMember("balances", "SELECT 1", sources=["accounts"]),
        PythonMember("daily", "mypkg.jobs:daily", sources=["events"]),
        atomicity="per_table",
        on_schema_change="fail",
    )
    assert RefreshGroup.from_dict(group.to_dict()) == group


def test_from_dict_validates_again() -> None:
    data = make_group(Mirror("accounts")).to_dict()
    data["members"][0]["kind"] = "view"
    with pytest.raises(DeclarationError, match="unknown member kind 'view'"):
        RefreshGroup.from_dict(data)


def test_member_lookup() -> None:
    group = make_group(Mirror("accounts"))
    assert group.member("ACCOUNTS").name == "accounts"
    with pytest.raises(MemberNotFoundError, match="group 'bank' has no member 'nope'") as missing:
        group.member("nope")
    assert isinstance(missing.value, KeyError) and is_final(missing.value)
