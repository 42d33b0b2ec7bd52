"""A worker killed while its executor runs tasks: the trigger polls the driver's REST API."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections.abc import Callable
from typing import Any

from airflow_provider_streambed.testing.spark_cluster import NamespacedSparkCluster

#: Seconds the killer waits for each thing it waits for (a task on the executor, the driver noticing).
KILL_TIMEOUT = 240.0


class WorkerKiller(threading.Thread):
    """Kills a worker once its executor runs tasks of the refresh, polling the driver's REST API, then
    waits for the driver to count that executor lost.

    Attributes:
        seen: the executor's figures at the kill (``activeTasks``, ``totalTasks``), empty if it never ran.
        lost: whether the running driver then listed the executor as lost (the kill hit a running job).
    """

    def __init__(self, cluster: NamespacedSparkCluster, worker: int, ui_port: int) -> None:
        super().__init__(daemon=True)
        self.cluster = cluster
        self.worker = worker
        self.api = f"http://{cluster.address}:{ui_port}/api/v1/applications"
        self.stopping = threading.Event()
        self.seen: dict[str, int] = {}
        self.lost = False

    def run(self) -> None:
        """Wait for a task on the worker's executor, kill the worker, wait for the driver to notice."""
        executor = self._wait(lambda found: bool(found["activeTasks"] or found["totalTasks"]))
        if executor is None:
            return
        self.cluster.kill_worker(self.worker)
        self.seen = {key: int(executor[key]) for key in ("activeTasks", "totalTasks")}
        self.lost = self._wait(lambda found: not found["isActive"]) is not None

    def _wait(self, wanted: Callable[[dict[str, Any]], bool]) -> dict[str, Any] | None:
        """The worker's executor as the driver lists it, once ``wanted``; ``None`` if stopped first."""
        deadline = time.monotonic() + KILL_TIMEOUT
        while not self.stopping.is_set() and time.monotonic() < deadline:
            executor = self._executor()
            if executor is not None and wanted(executor):
                return executor
            time.sleep(0.1)
        return None

    def _executor(self) -> dict[str, Any] | None:
        applications = self._get(self.api)
        if not applications:
            return None
        executors = self._get(f"{self.api}/{applications[0]['id']}/allexecutors") or []
        host = self.cluster.worker_address(self.worker)
        return next((executor for executor in executors if executor["hostPort"].startswith(f"{host}:")), None)

    @staticmethod
    def _get(url: str) -> Any:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                return json.load(response)
        except (OSError, ValueError):  # the driver or its UI is not up (or not JSON) yet, or is gone
            return None
