"""The source changing under a group with a published cut: each fails the next capture with an
error naming what changed, before anything is pinned (issue 15, item 6)."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from airflow_provider_streambed.capture.names import publication_name
from airflow_provider_streambed.capture.run import capture_run
from airflow_provider_streambed.capture.run_records import CaptureResult
from airflow_provider_streambed.exceptions import SourceError
from airflow_provider_streambed.ledger import CutMember, Ledger
from tests.integration.capture.conftest import make_group

pytestmark = pytest.mark.slow
GROUP = make_group("accounts", "transfers")


@pytest.fixture
def published(source: psycopg.Connection[Any], ledger: Ledger, warehouse: str) -> None:
    """Both tables captured by run r1 and recorded as cut 1 (the members' snapshots are not needed here)."""
    source.execute("CREATE TABLE accounts (id int PRIMARY KEY, balance int NOT NULL)")
    source.execute("CREATE TABLE transfers (id int PRIMARY KEY, amount int NOT NULL)")
    source.execute("INSERT INTO accounts VALUES (1, 10)")
    captured = capture_run(source, GROUP, ledger, "r1", warehouse)
    assert isinstance(captured, CaptureResult)
    members = {name: CutMember(name, f"ns.{name}", 1, f"file:///w/{name}.json") for name in ("accounts", "transfers")}
    with ledger.begin() as connection:
        ledger.record_cut(connection, GROUP.name, "r1", captured.watermark, members)
    source.execute("INSERT INTO accounts VALUES (2, 20)")


def pinned(ledger: Ledger) -> bool:
    return ledger.get_run(GROUP.name, "r2") is not None


@pytest.mark.parametrize(("change", "message"), [
    ("ALTER PUBLICATION {pub} DROP TABLE transfers",
     r"publication streambed_g no longer covers public.transfers \(altered by hand\?\): changes made since were "
     r"never decoded"),
    ("DROP PUBLICATION {pub}", r"publication streambed_g was dropped \(altered by hand\?\)"),
    ("DROP TABLE transfers", r"member 'transfers': source table 'public.transfers' does not exist"),
    ("ALTER TABLE transfers RENAME TO payments", r"member 'transfers': source table 'public.transfers' does not exist"),
])
def test_a_source_changed_by_hand_fails_the_next_capture_naming_it(
    source: psycopg.Connection[Any], ledger: Ledger, warehouse: str, published: None, change: str, message: str
) -> None:
    source.execute(change.format(pub=publication_name(GROUP)))
    with pytest.raises(SourceError, match=message):
        capture_run(source, GROUP, ledger, "r2", warehouse)
    assert not pinned(ledger)


def test_a_lost_replication_right_is_named(
    source: psycopg.Connection[Any], pg_dsn: str, ledger: Ledger, warehouse: str, published: None
) -> None:
    source.execute("CREATE ROLE streambed_reader LOGIN")
    source.execute("GRANT SELECT ON accounts, transfers TO streambed_reader")
    try:
        with (psycopg.connect(pg_dsn, user="streambed_reader", autocommit=True) as reader,
              pytest.raises(SourceError, match="role 'streambed_reader' lacks replication rights; grant them")):
            capture_run(reader, GROUP, ledger, "r2", warehouse)
    finally:
        source.execute("REVOKE ALL ON accounts, transfers FROM streambed_reader")
        source.execute("DROP ROLE streambed_reader")
    assert not pinned(ledger)
    assert isinstance(capture_run(source, GROUP, ledger, "r2", warehouse), CaptureResult)  # the group still works


@pytest.mark.parametrize(("revoke", "message"), [
    ("REVOKE SELECT ON transfers FROM streambed_operator",
     r"member 'transfers': role 'streambed_operator' lacks the SELECT privilege on source table 'public.transfers'"),
    ("REVOKE SELECT ON accounts FROM streambed_operator; GRANT SELECT (id) ON accounts TO streambed_operator",
     r"member 'accounts': role 'streambed_operator' lacks the SELECT privilege on columns balance of source table"),
])
def test_a_lost_select_privilege_is_named(
    source: psycopg.Connection[Any], pg_dsn: str, ledger: Ledger, warehouse: str, published: None, revoke: str,
    message: str,
) -> None:
    source.execute("CREATE ROLE streambed_operator LOGIN REPLICATION")
    source.execute("GRANT SELECT ON accounts, transfers TO streambed_operator")
    source.execute(revoke)
    try:
        with (psycopg.connect(pg_dsn, user="streambed_operator", autocommit=True) as operator,
              pytest.raises(SourceError, match=message)):
            capture_run(operator, GROUP, ledger, "r2", warehouse)
    finally:
        source.execute("REVOKE ALL ON accounts, transfers FROM streambed_operator")
        source.execute("DROP ROLE streambed_operator")
    assert not pinned(ledger)
