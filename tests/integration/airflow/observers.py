"""What a DAG run leaves behind for the Airflow end-to-end tests: OpenLineage events, extra links,
and a watch for a secret in command lines and warehouse files."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

SECRET = "Pw-streambed-7f3a9c"


class Watch(threading.Thread):
    """Scans every process's command line and the warehouse's files while the run goes on (a file
    again only when its inode, size, or modification or change time changed)."""

    def __init__(self, warehouse: Path) -> None:
        super().__init__(daemon=True)
        self.warehouse, self.stop, self.found, self.scans = warehouse, threading.Event(), set[str](), 0
        self.read: dict[Path, tuple[int, int, int, int]] = {}

    def run(self) -> None:
        while not self.stop.wait(0.05):
            self.scan()

    def scan(self) -> None:
        self.scans += 1
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            try:
                text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:  # the process ended meanwhile
                continue
            if SECRET in text:
                self.found.add(f"{cmdline}: {text[:200]}")
        for path in self.warehouse.rglob("*"):
            try:
                status = path.stat()
                seen = (status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns)
                if not path.is_file() or self.read.get(path) == seen:
                    continue
                if SECRET.encode() in path.read_bytes():
                    self.found.add(str(path))
                self.read[path] = seen
            except OSError:  # moved or deleted meanwhile (staging)
                continue


def clear_openlineage_config() -> None:
    """Forget the OpenLineage provider's cached configuration (read from the environment once)."""
    from airflow.providers.openlineage import conf

    for value in vars(conf).values():
        if callable(getattr(value, "cache_clear", None)):
            value.cache_clear()


def lineage_events(path: Path, job: str, event_type: str) -> list[dict[str, Any]]:
    """The OpenLineage events of type ``event_type`` that ``job`` (``<dag_id>.<task_id>``) wrote to ``path``."""
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [e for e in lines if e["job"]["name"] == job and e["eventType"] == event_type]


def stored_link(dag_run: Any, task_id: str, link: str) -> str:
    """The URL Airflow stored for a task's extra link (what the UI shows)."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        row = session.execute(XComModel.get_many(key=f"_link_{link}", run_id=dag_run.run_id, dag_ids=dag_run.dag_id,
                                                 task_ids=task_id).with_only_columns(XComModel.value)).first()
    assert row is not None, f"{task_id} stored no {link}"
    return str(row[0])


def urlparse_path(uri: str) -> str:
    from urllib.parse import urlparse

    return urlparse(uri).path
