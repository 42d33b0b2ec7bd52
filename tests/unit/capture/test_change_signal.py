"""The change trigger's decision: once per new counter state, placed by the ledger's last cut W."""

from __future__ import annotations

from airflow_provider_streambed.capture.change_signal import SourceState, TableCounters, counters_moved, decide
from airflow_provider_streambed.lsn import Lsn

W = Lsn.parse("0/3000000")
QUIET = (TableCounters("public.accounts", 16384, 16384, 20), TableCounters("public.transfers", 16390, 16390, 0))
WRITTEN = (TableCounters("public.accounts", 16384, 16384, 22), QUIET[1])


def state(lsn: Lsn, tables: tuple[TableCounters, ...]) -> SourceState:
    return SourceState(lsn, tables)


def test_a_first_poll_at_the_last_cut_does_not_fire_and_keeps_the_counters() -> None:
    decision = decide(None, state(W, QUIET), W)
    assert (decision.fire, decision.seen) == (False, QUIET)


def test_a_first_poll_past_the_last_cut_fires_once_for_what_no_trigger_watched() -> None:
    first = decide(None, state(W + 120, QUIET), W)
    assert first.fire and "while no trigger watched" in first.reason
    assert not decide(first.seen, state(W + 500, QUIET), W).fire  # the same counters: no second event


def test_a_group_without_a_cut_fires() -> None:
    assert decide(None, state(W, QUIET), None).fire


def test_a_write_after_the_last_cut_fires_once_per_new_counter_state() -> None:
    first = decide(QUIET, state(W + 200, WRITTEN), W)
    assert first.fire and first.reason.startswith("public.accounts written after")
    assert not decide(first.seen, state(W + 300, WRITTEN), W).fire
    more = (TableCounters("public.accounts", 16384, 16384, 22), TableCounters("public.transfers", 16390, 16390, 1))
    again = decide(first.seen, state(W + 400, more), W)
    assert again.fire and "public.transfers" in again.reason and "public.accounts" not in again.reason


def test_counters_a_cut_already_holds_do_not_fire() -> None:
    """Late-flushed statistics of commits before W, or a run that published past the change."""
    decision = decide(QUIET, state(W, WRITTEN), W)
    assert (decision.fire, decision.seen) == (False, WRITTEN)


def test_a_truncate_a_reset_or_a_new_table_is_a_change() -> None:
    truncated = (TableCounters("public.accounts", 16384, 16500, 20), QUIET[1])
    reset = (TableCounters("public.accounts", 16384, 16384, 0), QUIET[1])
    recreated = (TableCounters("public.accounts", 17000, 17000, 0), QUIET[1])
    for tables in (truncated, reset, recreated, QUIET[:1]):
        assert decide(QUIET, state(W + 1, tables), W).fire, tables


def test_the_ledger_is_read_only_when_a_counter_moved() -> None:
    assert counters_moved(None, state(W, QUIET))
    assert not counters_moved(QUIET, state(W + 900, QUIET))
    assert counters_moved(QUIET, state(W, WRITTEN))
