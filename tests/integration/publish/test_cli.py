"""``streambed cuts`` against a real catalog: list, show, a failing verify, pins and expiry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyiceberg.catalog.sql import SqlCatalog
from sqlalchemy import update

from airflow_provider_streambed.catalog import open_catalog
from airflow_provider_streambed.cli import main
from airflow_provider_streambed.ledger import Ledger, cut_members_table
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.publish import publish_cut
from tests.integration.publish.helpers import bank_tables, make_group, pin_and_stage

pytestmark = pytest.mark.slow


def test_cuts_list_show_and_verify(sqlite_props: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    catalog = open_catalog(sqlite_props)
    assert isinstance(catalog, SqlCatalog)
    ledger = Ledger(catalog.engine)
    ledger.create()
    for version in (1, 2):
        manifests = pin_and_stage(ledger, sqlite_props["warehouse"], "bank", f"run{version}", Lsn(1000 * version),
                                  bank_tables(version))
        publish_cut(catalog, ledger, make_group(), f"run{version}", manifests)
    base = ["--catalog-uri", sqlite_props["uri"], "--warehouse", sqlite_props["warehouse"], "--group", "bank"]

    assert main(["cuts", "list", *base, "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(c["cut_id"], c["watermark"], c["prev_watermark"]) for c in listed["cuts"]] == [(1, "0/3E8", None),
                                                                                         (2, "0/7D0", "0/3E8")]
    assert listed["checked_by"] == "run2" and listed["source_checked_at"] is not None
    assert main(["cuts", "list", *base]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].startswith("group bank: cut 2 (W=0/7D0) published at ") and "source checked at 20" in table[0]
    assert table[1].split() == ["cut_id", "watermark", "prev_watermark", "published_at", "run_key", "pinned"]
    assert table[4].split()[:2] == ["2", "0/7D0"]

    assert main(["cuts", "show", *base, "--cut", "1", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert {m["member"]: m["rows"] for m in shown["members"]} == {"accounts": 5, "totals": 1}
    assert main(["cuts", "show", *base]) == 0
    assert "group bank cut 2  W=0/7D0" in capsys.readouterr().out

    assert main(["cuts", "verify", *base]) == 0
    assert "OK, 2 member snapshots verified" in capsys.readouterr().out

    # break cut 1: its 'totals' row now names cut 2's snapshot, which carries cut 2's id and W
    cut2 = ledger.get_cut("bank", 2)
    with ledger.begin() as connection:
        connection.execute(update(cut_members_table)
                           .where(cut_members_table.c.cut_id == 1, cut_members_table.c.member == "totals")
                           .values(snapshot_id=cut2.members["totals"].snapshot_id))
    assert main(["cuts", "verify", *base, "--cut", "1"]) == 1
    out = capsys.readouterr().out
    assert "FAILED" in out
    assert "has streambed.cut-id='2' and streambed.watermark-lsn='0/7D0', expected cut 1 at W=0/3E8" in out
    assert f"tag bank-cut-1 of ns.totals does not name snapshot {cut2.members['totals'].snapshot_id}" in out
    assert main(["cuts", "verify", *base, "--cut", "1", "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["ok"] is False
    assert main(["cuts", "show", *base, "--cut", "9"]) == 2
    assert "group 'bank' has no cut 9" in capsys.readouterr().out


DECLARATION = '''
import datetime as dt
from airflow_provider_streambed import CutRetention, RefreshGroup, SqlMember

bank = RefreshGroup("bank", "src", "cat", "ns", [SqlMember("accounts", "select 1"), SqlMember("totals", "select 1")],
                    retention=CutRetention(2, keep_newer_than=dt.timedelta(0), delete_files_after=dt.timedelta(0)))
'''


def test_cuts_pin_unpin_and_expire(
    sqlite_props: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    catalog = open_catalog(sqlite_props)
    assert isinstance(catalog, SqlCatalog)
    ledger = Ledger(catalog.engine)
    ledger.create()
    for version in (1, 2, 3, 4):
        manifests = pin_and_stage(ledger, sqlite_props["warehouse"], "bank", f"run{version}", Lsn(1000 * version),
                                  bank_tables(version))
        publish_cut(catalog, ledger, make_group(), f"run{version}", manifests)  # no retention: every cut kept
    declaration = tmp_path / "groups.py"
    declaration.write_text(DECLARATION)
    where = ["--catalog-uri", sqlite_props["uri"], "--warehouse", sqlite_props["warehouse"]]

    assert main(["cuts", "pin", "bank", "2", *where]) == 0
    assert capsys.readouterr().out.strip() == "group bank cut 2: pinned"
    assert main(["cuts", "pin", "--group", "bank", "--cut", "1", *where, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["pinned"] is True
    assert main(["cuts", "unpin", "bank", "1", *where]) == 0
    assert capsys.readouterr().out.strip() == "group bank cut 1: not pinned"
    assert main(["cuts", "list", "--group", "bank", *where, "--json"]) == 0
    assert [(c["cut_id"], c["pinned"]) for c in json.loads(capsys.readouterr().out)["cuts"]] == [
        (1, False), (2, True), (3, False), (4, False)]
    assert main(["cuts", "list", "--group", "bank", *where]) == 0
    assert capsys.readouterr().out.splitlines()[4].split()[-1] == "pinned"  # the row of cut 2

    assert main(["cuts", "expire", "--group", "bank", *where]) == 2
    assert "--group must name the declaration" in capsys.readouterr().out
    assert main(["cuts", "expire", "--group", f"{declaration}:bank", *where, "--dry-run", "--json"]) == 0
    dry = json.loads(capsys.readouterr().out)
    assert dry["dry_run"] is True and dry["expired_cuts"] == [1] and dry["deleted_files"] > 0
    assert [cut.cut_id for cut in ledger.list_cuts("bank")] == [1, 2, 3, 4]
    assert main(["cuts", "expire", "--group", f"{declaration}:bank", *where]) == 0
    assert capsys.readouterr().out.startswith(
        f"group bank: expired cuts [1]; deleted {dry['deleted_files']} files, 0 unreferenced files wait")
    assert [cut.cut_id for cut in ledger.list_cuts("bank")] == [2, 3, 4]

    assert main(["cuts", "show", "--group", "bank", "--cut", "1", *where]) == 2
    assert "error: group 'bank': cut 1 (W=0/3E8), which expired at" in capsys.readouterr().out
    assert main(["cuts", "pin", "bank", "1", *where]) == 2
    assert "which expired at" in capsys.readouterr().out
    assert main(["cuts", "pin", "bank", *where]) == 2
    assert "name the cut" in capsys.readouterr().out
    assert main(["cuts", "show", "bank", "2", *where]) == 2
    assert "unexpected arguments" in capsys.readouterr().out
