"""Member declarations: defaults, immutability, and errors that name the member at fault."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_streambed.exceptions import DeclarationError
from airflow_provider_streambed.member_declarations import Mirror, PythonMember, SqlMember, incremental_member


def test_mirror_defaults() -> None:
    mirror = Mirror("accounts")
    assert (mirror.name, mirror.schema, mirror.table, mirror.qualified_table) == (
        "accounts", "public", "accounts", "public.accounts")
    assert Mirror("Sales.Orders").qualified_table == "Sales.Orders"


def test_declarations_are_frozen() -> None:
    mirror = Mirror("accounts")
    with pytest.raises(AttributeError):
        mirror.name = "other"  # type: ignore[misc]  # exercising immutability


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Mirror("public.bad-name"), r"source table 'public.bad-name': 'bad-name' is not a valid identifier"),
        (lambda: Mirror("a.b.c"), r"mirror source table 'a.b.c' must be 'schema.table' or 'table'"),
        (lambda: Mirror("accounts", name="1st"), r"mirror of 'accounts', name: '1st' is not a valid identifier"),
        (lambda: Mirror('x"; drop table y; --'), r"is not a valid identifier"),
        (lambda: Mirror("t", compact_deleted_ratio=0), r"mirror 't': compact_deleted_ratio must be > 0, got 0"),
        (lambda: Mirror("t", compact_max_files=0), r"mirror 't': compact_max_files must be an integer >= 1, got 0"),
        (lambda: SqlMember("my table", "SELECT 1"), r"sql member name: 'my table' is not a valid identifier"),
        (lambda: SqlMember("totals", "  "), r"sql member 'totals': query is empty"),
        (lambda: SqlMember("totals", "SELECT 1", sources="accounts"), r"sql member 'totals', sources: expected a list"),
        (lambda: PythonMember("daily", "mypkg.jobs.daily"), r"python member 'daily': callable path 'mypkg.jobs.daily'"),
        (lambda: PythonMember("daily", "mypkg:jobs:daily"), r"callable path 'mypkg:jobs:daily' must look like"),
        (lambda: PythonMember("daily", "my-pkg.jobs:daily"), r"callable path"),
        (lambda: PythonMember("daily", "mypkg.jobs:daily", incremental="yes"),
         r"python member 'daily': incremental must be True or False"),
        (lambda: PythonMember("daily", "jobs:daily", sources=["ok", "not ok"]), r"python member 'daily', sources"),
    ],
)
def test_member_errors_name_the_member(build: Any, message: str) -> None:
    with pytest.raises(DeclarationError, match=message):
        build()


def test_incremental_members_are_sql_and_python_members_that_say_so() -> None:
    assert incremental_member(SqlMember("totals", "SELECT 1", sources=["a"], incremental=True))
    assert not incremental_member(SqlMember("totals", "SELECT 1", sources=["a"]))
    assert incremental_member(PythonMember("daily", "jobs:daily", incremental=True))
    assert not incremental_member(PythonMember("daily", "jobs:daily"))
    assert not incremental_member(Mirror("public.a"))
