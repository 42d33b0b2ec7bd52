"""What the tests' throwaway servers share: a ``with`` block that stops what it started; a process group's stop."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from types import TracebackType
from typing import Self


class Throwaway:
    """A throwaway server: ``with`` starts it (:meth:`start`) and stops it (:meth:`stop`), also when
    the start fails half-way (whatever it started is stopped)."""

    def start(self) -> Self:
        """Start the server; returns self."""
        raise NotImplementedError

    def stop(self) -> None:
        """Stop the server and remove what it made; safe on a server that did not start."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


def stop_process_group(process: subprocess.Popen[bytes], timeout: float = 10) -> None:
    """SIGTERM the process group led by ``process``, SIGKILL it after ``timeout`` seconds; waits for it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
