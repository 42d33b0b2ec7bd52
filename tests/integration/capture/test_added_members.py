"""A mirror added to a group with cuts gets every change once: the transactions that commit between
its table joining the publication and its copy's snapshot are in the copy, and extraction drops
them for that member (issue 32: no row counted twice); one that wrote before the table joined is
waited for, so the copy holds it (no row lost)."""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from airflow_provider_streambed.capture import bootstrap as bootstrap_module
from airflow_provider_streambed.capture import waits
from airflow_provider_streambed.capture.bootstrap import ExportedSnapshot
from airflow_provider_streambed.capture.bootstrap_marker import MARKER_NAME, read_marker
from airflow_provider_streambed.capture.copy_snapshot import CopySnapshot
from airflow_provider_streambed.capture.run import capture_run
from airflow_provider_streambed.capture.run_records import CaptureResult, CaptureSettings
from airflow_provider_streambed.exceptions import CaptureError, SlotError
from airflow_provider_streambed.ledger import Ledger
from airflow_provider_streambed.local import refresh_once
from airflow_provider_streambed.read import CutReader
from airflow_provider_streambed.staging import CAPTURE_DIR, XID, capture_manifest_uri, join, staging_root
from tests.integration.capture.conftest import make_group, publish, read_changes

pytestmark = pytest.mark.slow
Conn = psycopg.Connection[Any]


def commit_before_the_copy(
    monkeypatch: pytest.MonkeyPatch, dsn: str, committed: list[str], open_one: str
) -> list[CopySnapshot]:
    """Patch the copy's snapshot export so that, once the ALTER PUBLICATION has committed,
    ``committed`` commit one transaction each before the export (in the copy, and decoded), and
    ``open_one`` runs in a transaction open across the export that commits after it (decoded, not
    in the copy). Returns the list the exports made are appended to."""
    real = bootstrap_module.exported_snapshot
    exports: list[CopySnapshot] = []

    @contextlib.contextmanager
    def exported_late(conn: Conn) -> Iterator[ExportedSnapshot]:
        with psycopg.connect(dsn, autocommit=True) as writer, psycopg.connect(dsn) as late:
            late.execute(open_one)  # begins a transaction that gets its xid before the export
            for statement in committed:
                writer.execute(statement)
            with real(conn) as exported:
                late.commit()
                exports.append(exported.visibility)
                yield exported

    monkeypatch.setattr(bootstrap_module, "exported_snapshot", exported_late)
    return exports


def rows(conn: Conn, query: str) -> Counter[tuple[Any, ...]]:
    return Counter(conn.execute(query).fetchall())


def test_added_append_only_and_keyless_mirrors_publish_each_row_once(
    pg_dsn: str, sqlite_catalog_uri: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    properties = {"uri": sqlite_catalog_uri, "warehouse": (tmp_path / "warehouse").as_uri()}
    with psycopg.connect(pg_dsn, autocommit=True) as source:
        source.execute("CREATE TABLE log (n int, note text)")
        source.execute("CREATE TABLE events (n int, note text)")
        source.execute("CREATE TABLE pairs (a int, b int)")  # keyless: a multiset
        source.execute("ALTER TABLE pairs REPLICA IDENTITY FULL")
        source.execute("INSERT INTO pairs VALUES (1, 1), (1, 1)")
        source.execute("INSERT INTO log VALUES (0, 'first')")
        source.execute("INSERT INTO events SELECT g, 'before' FROM generate_series(1, 20) g")
        first = make_group("log", append_only=("log",))
        assert refresh_once(first, source_dsn=pg_dsn, catalog_properties=properties).cut.cut_id == 1
        window = [  # each inserts into every table: the existing member keeps its rows
            f"WITH e AS (INSERT INTO events VALUES ({n}, 'window')), p AS (INSERT INTO pairs VALUES (1, 1)) "
            f"INSERT INTO log VALUES ({n}, 'window')"
            for n in range(100, 105)
        ]
        exports = commit_before_the_copy(monkeypatch, pg_dsn, window, "INSERT INTO events VALUES (200, 'open')")
        group = make_group("log", "events", "pairs", append_only=("log", "events"))
        with caplog.at_level(logging.INFO, logger="airflow_provider_streambed.capture.extract"):
            second = refresh_once(group, source_dsn=pg_dsn, catalog_properties=properties)
        assert len(exports) == 1 and second.cut.cut_id == 2
        cut = CutReader(properties, group).get(2)
        events = Counter(zip(*cut.to_arrow("events").select(["n", "note"]).to_pydict().values(), strict=True))
        log = Counter(zip(*cut.to_arrow("log").select(["n", "note"]).to_pydict().values(), strict=True))
        assert events == rows(source, "SELECT n, note FROM events") and events[(100, "window")] == 1
        assert events[(200, "open")] == 1  # in progress at the copy's snapshot: decoded, kept
        assert log == rows(source, "SELECT n, note FROM log") and sum(log.values()) == 6
        pairs = Counter(zip(*cut.to_arrow("pairs").select(["a", "b"]).to_pydict().values(), strict=True))
        assert pairs == rows(source, "SELECT a, b FROM pairs") == {(1, 1): 7}
    assert "dropped 5 changes of member events that its copy holds" in caplog.text
    assert "dropped 5 changes of member pairs that its copy holds" in caplog.text


def test_a_retried_capture_reuses_the_copies_and_filters_the_same_way(
    source: Conn, ledger: Ledger, warehouse: str, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    source.execute("CREATE TABLE t (id int PRIMARY KEY)")
    source.execute("CREATE TABLE links (src int, dst int)")  # keyless: a multiset, duplicates count
    source.execute("ALTER TABLE links REPLICA IDENTITY FULL")
    source.execute("INSERT INTO links VALUES (1, 2), (1, 2)")
    publish(source, ledger, make_group("t"), capture_run(source, make_group("t"), ledger, "r1", warehouse))
    exports = commit_before_the_copy(monkeypatch, pg_dsn, ["INSERT INTO links VALUES (1, 2)"] * 3 + [
        "INSERT INTO t VALUES (1)"], "INSERT INTO links VALUES (3, 4)")
    group = make_group("t", "links")
    result = capture_run(source, group, ledger, "r2", warehouse)
    assert isinstance(result, CaptureResult) and len(exports) == 1
    capture_dir = join(staging_root(warehouse, group.name, "r2"), CAPTURE_DIR)
    marker = read_marker(capture_dir)
    assert marker is not None and set(marker.copies) == {"links"} and marker.copies["links"].snapshot is not None

    def multiset(captured: CaptureResult) -> Counter[tuple[int, int]]:
        changes = read_changes(captured.manifest, "links").to_pylist()
        return Counter((row["src"], row["dst"]) for row in changes if row["_op"] != "D")

    truth = rows(source, "SELECT src, dst FROM links")
    assert multiset(result) == truth and truth[(1, 2)] == 5
    assert [row["id"] for row in read_changes(result.manifest, "t").to_pylist()] == [1]

    # A crash after the pin and before the manifest: the retry reuses the copies, filtered the same.
    manifest = Path(capture_manifest_uri(staging_root(warehouse, group.name, "r2")).removeprefix("file://"))
    manifest.unlink()
    retried = capture_run(source, group, ledger, "r2", warehouse)
    assert isinstance(retried, CaptureResult) and len(exports) == 1, "the retry copied again"
    assert [t.copy_files for t in retried.manifest.tables] == [t.copy_files for t in result.manifest.tables]
    assert multiset(retried) == truth
    assert read_changes(retried.manifest, "links")[XID].to_pylist() == read_changes(
        result.manifest, "links")[XID].to_pylist()

    # An older release's record has no snapshot: not reused, and a pinned run cannot copy again.
    marker_path = Path(join(capture_dir, MARKER_NAME).removeprefix("file://"))
    data = json.loads(marker_path.read_text())
    del data["tables"]["links"]["snapshot"]
    marker_path.write_text(json.dumps(data))
    manifest.unlink()
    with pytest.raises(SlotError, match=r"run 'r2' pinned W=.* bootstrap copies are gone .*older release.*new run"):
        capture_run(source, group, ledger, "r2", warehouse)


def test_a_transaction_that_wrote_before_the_table_joined_the_publication_is_waited_for(
    source: Conn, ledger: Ledger, warehouse: str, pg_dsn: str, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(waits, "LOG_INTERVAL_SECONDS", 0.3)
    source.execute("CREATE TABLE t (id int PRIMARY KEY)")
    source.execute("CREATE TABLE links (src int, dst int)")
    source.execute("ALTER TABLE links REPLICA IDENTITY FULL")
    publish(source, ledger, make_group("t"), capture_run(source, make_group("t"), ledger, "r1", warehouse))
    group, quick = make_group("t", "links"), CaptureSettings(slot_create_timeout_seconds=1)
    with psycopg.connect(pg_dsn, application_name="streambed-early-writer") as early:
        early.execute("INSERT INTO links VALUES (9, 9)")  # not decoded: links was not published yet
        with pytest.raises(CaptureError, match=(
                rf"group 'g': copying added members \['links'\] gave up after waiting 1 s for: "
                rf"pid {early.info.backend_pid} .*application streambed-early-writer.*; nothing was copied")):
            capture_run(source, group, ledger, "r2", warehouse, quick)
        assert "copying added members ['links'] has waited" in caplog.text
        assert ledger.get_run(group.name, "r2") is None  # refused before the pin
        threading.Timer(0.5, early.commit).start()
        result = capture_run(source, group, ledger, "r2", warehouse)  # waits for it, then copies
    assert isinstance(result, CaptureResult)
    assert Counter((row["src"], row["dst"]) for row in read_changes(result.manifest, "links").to_pylist()) == {
        (9, 9): 1}
