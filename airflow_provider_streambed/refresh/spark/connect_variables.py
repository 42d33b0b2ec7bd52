"""The environment variables by which pyspark switches a whole process to Spark Connect."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

#: Environment variables by which pyspark decides, process-wide, that it talks to Spark Connect.
CONNECT_VARIABLES = ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE", "SPARK_LOCAL_REMOTE")


@contextmanager
def connect_mode() -> Iterator[None]:
    """Undo, on exit, the process-wide switch pyspark makes when a remote session is created.

    pyspark sets ``SPARK_CONNECT_MODE_ENABLED`` (and may set ``SPARK_REMOTE``) in ``os.environ``,
    which turns every later PySpark call in this process, and every spark-submit it starts, into
    Spark Connect ones (a later spark-submit job then fails). The variables are restored when the
    refresh is done.
    """
    saved = {name: os.environ.get(name) for name in CONNECT_VARIABLES}
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
