"""A bootstrap copy's snapshot visibility: which decoded transactions the copy already holds."""

from __future__ import annotations

from dataclasses import dataclass, field

_XID_SPACE = 1 << 32  # a 32-bit xid is an xid8 modulo this
_HALF = 1 << 31


def xid_precedes(first: int, second: int) -> bool:
    """PostgreSQL's ``TransactionIdPrecedes`` for normal 32-bit xids: ``(int32)(first - second) < 0``.

    Args:
        first: a 32-bit transaction id (or an xid8, reduced modulo 2^32 here).
        second: another.

    Returns:
        Whether ``first`` is older than ``second`` in the circular xid space.
    """
    return (first - second) % _XID_SPACE >= _HALF


@dataclass(frozen=True, slots=True)
class CopySnapshot:
    """The snapshot a copy was taken at, as ``pg_current_snapshot()`` reports it (xid8 values).

    Attributes:
        xmin: every transaction below it had ended.
        xmax: every transaction at or above it was yet to end.
        xip: the transactions in progress between them.
    """

    xmin: int
    xmax: int
    xip: frozenset[int] = frozenset()
    _xip32: frozenset[int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_xip32", frozenset(xid % _XID_SPACE for xid in self.xip))

    @classmethod
    def parse(cls, text: str) -> CopySnapshot:
        """Read ``pg_snapshot`` text, ``xmin:xmax:xip,...`` (as :meth:`__str__` writes it)."""
        xmin, xmax, xip = text.split(":")
        return cls(int(xmin), int(xmax), frozenset(int(xid) for xid in xip.split(",") if xid))

    def __str__(self) -> str:
        return f"{self.xmin}:{self.xmax}:{','.join(str(xid) for xid in sorted(self.xip))}"

    def holds(self, xid: int) -> bool:
        """Whether the copy holds a committed transaction: it is visible in this snapshot.

        Args:
            xid: the transaction's top-level 32-bit xid (pgoutput's Begin, the changelog's ``_xid``).

        Returns:
            True when ``xid`` precedes ``xmin``, or precedes ``xmax`` and is not in ``xip``.
        """
        if xid_precedes(xid, self.xmin):
            return True
        return xid_precedes(xid, self.xmax) and xid % _XID_SPACE not in self._xip32


@dataclass
class CopyFilter:
    """Which changes of one added member its copy already holds: decided per transaction, counted.

    Attributes:
        snapshot: the member's copy snapshot.
        dropped: the changes dropped so far.
    """

    snapshot: CopySnapshot
    dropped: int = 0
    _holds_open: bool = False

    def begin(self, xid: int) -> None:
        """A transaction with top-level xid ``xid`` begins: decide whether the copy holds it."""
        self._holds_open = self.snapshot.holds(xid)

    def drops(self) -> bool:
        """Whether a change of the open transaction is dropped, the copy holding it (counted)."""
        if self._holds_open:
            self.dropped += 1
        return self._holds_open
