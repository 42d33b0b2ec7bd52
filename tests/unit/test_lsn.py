from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from airflow_provider_streambed.exceptions import LsnError, StreambedError
from airflow_provider_streambed.lsn import Lsn


@pytest.mark.parametrize(
    ("text", "value"),
    [("0/0", 0), ("16/B374D848", 0x16_B374D848), ("FFFFFFFF/FFFFFFFF", 2**64 - 1), ("0/16B3748", 0x16B3748)],
)
def test_parse_and_format_round_trip(text: str, value: int) -> None:
    lsn = Lsn.parse(text)
    assert int(lsn) == value
    assert str(lsn) == text
    assert Lsn.parse(str(Lsn(value))) == lsn


def test_lowercase_hex_is_accepted_and_formatted_uppercase() -> None:
    assert str(Lsn.parse("16/b374d848")) == "16/B374D848"


@pytest.mark.parametrize("text", ["", "16B374D848", "16/", "/1", "G/1", "1/2/3", "123456789/0", "0x1/2", " / "])
def test_bad_text_names_the_input(text: str) -> None:
    with pytest.raises(LsnError, match=re.escape(f"invalid LSN {text!r}: expected two hex numbers")):
        Lsn.parse(text)


def test_non_string_is_refused() -> None:
    with pytest.raises(LsnError, match="invalid LSN 12"):
        Lsn.parse(12)  # type: ignore[arg-type]  # exercising the runtime check


@pytest.mark.parametrize("make", [lambda: Lsn.parse("yesterday"), lambda: Lsn(-1)], ids=["text", "range"])
def test_errors_are_streambed_errors_and_still_value_errors(make: Callable[[], Lsn]) -> None:
    """Callers catching ``ValueError`` (the CLI's ``--watermark``, the capture operator) still do."""
    with pytest.raises(ValueError) as caught:
        make()
    assert isinstance(caught.value, LsnError)
    assert isinstance(caught.value, StreambedError)


def test_order_and_arithmetic() -> None:
    low, high = Lsn.parse("0/FFFFFFFF"), Lsn.parse("1/0")
    assert low < high and high > low and sorted([high, low]) == [low, high]
    assert low + 1 == high
    assert high - 1 == low
    assert high - low == 1
    assert {Lsn(5), Lsn(5)} == {Lsn(5)}


def test_range_is_checked() -> None:
    with pytest.raises(LsnError, match=re.escape("Lsn value -1 is outside 0 .. 2**64-1")):
        Lsn(-1)
    with pytest.raises(LsnError, match=re.escape(f"Lsn value {2**64} is outside")):
        Lsn(2**64 - 1) + 1
    with pytest.raises(TypeError):
        Lsn("0/1")  # type: ignore[arg-type]  # exercising the runtime check


def test_coerce() -> None:
    assert Lsn.coerce("0/10") == Lsn.coerce(16) == Lsn.coerce(Lsn(16)) == Lsn(16)
