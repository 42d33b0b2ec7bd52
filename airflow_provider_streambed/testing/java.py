"""Finding a Java of a given version for the JVM servers the tests start (Nessie needs a newer one than Spark)."""

from __future__ import annotations

import glob
import os
import re
import shutil
from pathlib import Path


def java_version(home: Path) -> int | None:
    """The major version of the Java in ``home``, from its ``release`` file; ``None`` without one."""
    release = home / "release"
    if not release.is_file():
        return None
    found = re.search(r'^JAVA_VERSION="(\d+)', release.read_text(encoding="utf-8", errors="replace"), re.MULTILINE)
    return int(found.group(1)) if found else None


def find_java(minimum: int, home: str | None = None) -> Path:
    """The ``java`` binary of a Java ``minimum`` or newer.

    Args:
        minimum: the oldest major version that serves.
        home: the one Java home to look in; ``None``: ``JAVA_HOME``, the ``java`` on ``PATH`` and
            ``/usr/lib/jvm/*`` (the newest first).

    Raises:
        FileNotFoundError: no such Java.
    """
    if home:
        homes = [Path(home)]
    else:
        on_path = shutil.which("java")
        homes = [Path(java_home) for java_home in (os.environ.get("JAVA_HOME"),) if java_home]
        homes += [Path(on_path).resolve().parents[1]] if on_path else []
        installed = [Path(path).parents[1] for path in glob.glob("/usr/lib/jvm/*/bin/java")]
        homes += sorted(installed, key=lambda candidate: java_version(candidate) or 0, reverse=True)
    for candidate in homes:
        version = java_version(candidate)
        if version is not None and version >= minimum and (candidate / "bin" / "java").is_file():
            return candidate / "bin" / "java"
    raise FileNotFoundError(f"no Java {minimum} or newer in {[str(candidate) for candidate in homes]}")
