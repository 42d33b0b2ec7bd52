"""Bootstrap copy options are checked when they are made (a DAG file's capture task makes them)."""

from __future__ import annotations

import pytest

from airflow_provider_streambed.capture.bootstrap import CopyOptions
from airflow_provider_streambed.exceptions import DeclarationError, is_final


def test_copy_options_refuse_no_connections_and_a_progress_interval_that_is_not_positive() -> None:
    assert CopyOptions(1).parallelism == 1
    with pytest.raises(DeclarationError, match="copy_parallelism must be at least 1, not 0") as parallelism:
        CopyOptions(0)
    with pytest.raises(DeclarationError, match="the copy progress interval must be positive, not -1") as interval:
        CopyOptions(progress_interval=-1)
    assert is_final(parallelism.value) and is_final(interval.value)
