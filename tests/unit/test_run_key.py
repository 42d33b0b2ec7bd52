from __future__ import annotations

import re

import pytest

from airflow_provider_streambed.exceptions import ConfigurationError, is_final
from airflow_provider_streambed.run_key import make_run_key


def test_run_key_is_path_safe_readable_and_stable() -> None:
    key = make_run_key("bank", "manual__2026-11-23T08:00:00+00:00")
    assert re.fullmatch(r"[A-Za-z0-9._-]+", key)
    assert key.startswith("bank.manual__2026-11-23T08_00_00_00_00-")
    assert key == make_run_key("bank", "manual__2026-11-23T08:00:00+00:00")


def test_runs_differing_only_in_unsafe_characters_get_distinct_keys() -> None:
    assert make_run_key("bank", "a:b") != make_run_key("bank", "a+b")
    assert make_run_key("bank.x", "y") != make_run_key("bank", "x.y")


def test_empty_parts_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="run key needs a dag_id and a run_id, got '' and 'run'") as error:
        make_run_key("", "run")
    assert is_final(error.value) and isinstance(error.value, ValueError)
