"""The Spark Connect server a benchmark runs on: one it is given (``--spark-remote``), or its own."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from airflow_provider_streambed.refresh.spark.connect_server import ConnectServer
from airflow_provider_streambed.testing.postgres import free_port

REMOTE_HELP = "a running Spark Connect server's URL (default: start one, local[2])"


@contextmanager
def connect_server(remote: str | None, state_dir: Path) -> Iterator[str]:
    """The URL ``remote``, or that of a local server (``local[2]``) started for the block and stopped after.

    Args:
        remote: a running server's URL (``sc://host:port``), or ``None``.
        state_dir: where a server started here keeps its pid and log files.
    """
    if remote:
        yield remote
        return
    with ConnectServer(port=free_port(), state_dir=state_dir).running() as url:
        yield url
