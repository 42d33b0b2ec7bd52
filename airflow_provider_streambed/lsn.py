"""PostgreSQL log sequence numbers (LSNs): the one place that parses and formats them.

An LSN is a 64-bit byte position in the write-ahead log, written by PostgreSQL as two hex
halves, ``"16/B374D848"``. Watermarks, commit positions and slot positions are all :class:`Lsn`.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_provider_streambed.exceptions import LsnError

if TYPE_CHECKING:
    from psycopg.abc import AdaptContext

_LSN_TEXT = re.compile(r"([0-9A-Fa-f]{1,8})/([0-9A-Fa-f]{1,8})")
_MAX = 2**64 - 1
PG_LSN_OID = 3220


@dataclass(frozen=True, order=True, slots=True)
class Lsn:
    """A log sequence number, ordered and hashable.

    ``Lsn + int`` and ``Lsn - int`` move by bytes; ``Lsn - Lsn`` is the distance in bytes.
    """

    value: int

    def __post_init__(self) -> None:
        if not isinstance(self.value, int) or isinstance(self.value, bool):
            raise TypeError(f"Lsn value must be an int, got {self.value!r}")
        if not 0 <= self.value <= _MAX:
            raise LsnError(f"Lsn value {self.value} is outside 0 .. 2**64-1")

    @classmethod
    def parse(cls, text: str) -> Lsn:
        """Parse PostgreSQL's ``"X/Y"`` form.

        Raises:
            LsnError: ``text`` is not an LSN (a ``ValueError``); the message quotes it.
        """
        match = _LSN_TEXT.fullmatch(text.strip()) if isinstance(text, str) else None
        if match is None:
            raise LsnError(f"invalid LSN {text!r}: expected two hex numbers as 'XXXXXXXX/XXXXXXXX'")
        return cls((int(match.group(1), 16) << 32) | int(match.group(2), 16))

    @classmethod
    def coerce(cls, value: Lsn | str | int) -> Lsn:
        """Return ``value`` as an Lsn, parsing text and wrapping ints."""
        if isinstance(value, Lsn):
            return value
        if isinstance(value, str):
            return cls.parse(value)
        return cls(value)

    def __str__(self) -> str:
        return f"{self.value >> 32:X}/{self.value & 0xFFFFFFFF:X}"

    def __int__(self) -> int:
        return self.value

    def __add__(self, delta: int) -> Lsn:
        if not isinstance(delta, int):
            return NotImplemented
        return Lsn(self.value + delta)

    def __sub__(self, other: Lsn | int) -> Any:
        if isinstance(other, Lsn):
            return self.value - other.value
        if isinstance(other, int):
            return Lsn(self.value - other)
        return NotImplemented


def register_lsn_adapters(context: AdaptContext | None = None) -> None:
    """Make psycopg load ``pg_lsn`` values as :class:`Lsn` and dump :class:`Lsn` as ``pg_lsn``.

    Args:
        context: a connection, cursor or adapters map; ``None`` registers globally.
    """
    from psycopg.adapt import Dumper, Loader
    from psycopg.pq import Format

    class LsnTextLoader(Loader):
        def load(self, data: Any) -> Lsn:
            return Lsn.parse(bytes(data).decode("ascii"))

    class LsnBinaryLoader(Loader):
        format = Format.BINARY

        def load(self, data: Any) -> Lsn:
            return Lsn(struct.unpack("!Q", bytes(data))[0])

    class LsnTextDumper(Dumper):
        oid = PG_LSN_OID

        def dump(self, obj: Any) -> bytes:
            return str(obj).encode("ascii")

    class LsnBinaryDumper(Dumper):
        format = Format.BINARY
        oid = PG_LSN_OID

        def dump(self, obj: Any) -> bytes:
            return struct.pack("!Q", obj.value)

    if context is None:
        import psycopg

        adapters = psycopg.adapters
    else:
        adapters = context.adapters
    adapters.register_loader(PG_LSN_OID, LsnTextLoader)
    adapters.register_loader(PG_LSN_OID, LsnBinaryLoader)
    adapters.register_dumper(Lsn, LsnTextDumper)
    adapters.register_dumper(Lsn, LsnBinaryDumper)
