"""Every error is retryable or final; final ones say no retry of the run can succeed."""

from __future__ import annotations

import pytest

from airflow_provider_streambed import exceptions
from airflow_provider_streambed.exceptions import (
    ConfigurationError,
    ConnectionConfigError,
    DeclarationError,
    FinalError,
    GroupBusyError,
    InvalidWatermarkError,
    LsnError,
    MemberNotFoundError,
    OutputSchemaError,
    RunSupersededError,
    SchemaChangeError,
    SourceError,
    StreambedError,
    WatermarkError,
    is_final,
)


@pytest.mark.parametrize(
    ("error", "final"),
    [
        (InvalidWatermarkError("W behind the slot"), True),
        (RunSupersededError("replaced"), True),
        (ConfigurationError("catalog property missing"), True),
        (DeclarationError("unknown source"), True),
        (ConnectionConfigError("no warehouse"), True),
        (MemberNotFoundError("no member 'x'"), True),
        (SchemaChangeError("column 'v' was dropped"), True),
        (OutputSchemaError("member 'totals': its output does not fit", "totals"), False),
        (WatermarkError("flush timed out"), False),
        (GroupBusyError("another run is pending"), False),
        (LsnError("invalid LSN 'x'"), False),
        (SourceError("connection refused"), False),
        (OSError("a driver's error"), False),
    ],
)
def test_kinds(error: BaseException, final: bool) -> None:
    assert is_final(error) is final


def test_final_errors_are_exactly_the_final_error_family() -> None:
    classes = [value for value in vars(exceptions).values()
               if isinstance(value, type) and issubclass(value, StreambedError)]
    assert {cls for cls in classes if not cls.retryable} == {cls for cls in classes if issubclass(cls, FinalError)}
    assert isinstance(InvalidWatermarkError("x"), WatermarkError)  # callers catching WatermarkError still do


def test_settings_errors_are_final_and_still_what_callers_caught() -> None:
    """A wrong setting is read again by every retry: final; callers catching ValueError still do."""
    for error in (ConfigurationError("x"), DeclarationError("x"), ConnectionConfigError("x")):
        assert isinstance(error, ValueError) and isinstance(error, ConfigurationError) and is_final(error)


def test_lsn_errors_are_streambed_errors_and_still_what_callers_caught() -> None:
    """Callers catching ValueError around ``Lsn.parse`` still do; a bad LSN alone does not make a run final."""
    error = LsnError("invalid LSN 'x'")
    assert isinstance(error, StreambedError) and isinstance(error, ValueError) and not is_final(error)
