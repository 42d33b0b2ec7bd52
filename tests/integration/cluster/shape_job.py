"""Driver of the cluster-shape tests (spark-submit, client mode): prints ``RESULT <json>`` as its last line.

``storage <bridge> <bucket> <prefix> <local file>``: executors write and read Parquet at
``s3://<bucket>/<prefix>/`` and try to open a file local to the driver. ``slow <bridge> <tasks>
<seconds>``: a stage of sleeping tasks; prints ``RUNNING`` once two of them run at once.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from collections.abc import Iterable
from pathlib import Path

from pyspark.sql import Row, SparkSession


def address_towards(bridge: str) -> str:
    """This process's address on the route to ``bridge`` (a UDP connect sends nothing)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.connect((bridge, 9))
        return str(sock.getsockname()[0])


def storage(spark: SparkSession, bridge: str, bucket: str, prefix: str, local_file: str) -> dict[str, object]:
    """Parquet through S3A on the executors, and a driver-local file opened on one."""
    sc = spark.sparkContext

    def rows(partition: int, _: Iterable[int]) -> Iterable[tuple[int, str]]:
        time.sleep(1)  # long enough for both executors to take a task
        here = address_towards(bridge)
        return iter([(partition * 1000 + row, here) for row in range(500)])

    phases: dict[str, float] = {}
    started = time.monotonic()

    def phase(name: str) -> None:
        nonlocal started
        phases[name] = round(time.monotonic() - started, 1)
        started = time.monotonic()

    uri = f"s3://{bucket}/{prefix}/numbers"
    written = sc.parallelize(range(4), 4).mapPartitionsWithIndex(rows).toDF("id long, writer string")
    written.write.mode("overwrite").parquet(uri)
    phase("write")
    back = spark.read.parquet(uri)
    phase("open")

    def reader(partition: Iterable[Row]) -> Iterable[tuple[str, int, list[str]]]:
        time.sleep(1)
        writers = [row.writer for row in partition]
        return iter([(address_towards(bridge), len(writers), sorted(set(writers)))])

    read = back.rdd.mapPartitions(reader).collect()
    phase("read")
    try:
        sc.parallelize([local_file], 1).map(lambda path: Path(path).read_text()).collect()
        opened = "opened"
    except Exception as error:  # a task's failure reaches the driver as a Py4J / Python exception
        opened = str(error)
    phase("local file")
    listings = sc.parallelize(range(2), 2).map(lambda _: (address_towards(bridge), sorted(os.listdir("/tmp"))))
    return {
        "writers": sorted({writer for _, _, writers in read for writer in writers}),
        "readers": sorted({address for address, _, _ in read}),
        "rows_read": sum(rows for _, rows, _ in read),
        "files": len(back.inputFiles()),
        "opened": opened,
        "driver_reads_local_file": Path(local_file).read_text(),
        "executor_tmp": dict(listings.collect()),
        "seconds": phases,
    }


def slow(spark: SparkSession, bridge: str, tasks: int, seconds: float) -> dict[str, object]:
    """A stage of ``tasks`` tasks sleeping ``seconds`` each; prints ``RUNNING`` when two run at once."""
    sc = spark.sparkContext
    tracker = sc.statusTracker()

    def watch() -> None:
        while True:
            running = [info.numActiveTasks for stage in tracker.getActiveStageIds()
                       if (info := tracker.getStageInfo(stage)) is not None]
            if sum(running) >= 2:
                print("RUNNING", flush=True)
                return
            time.sleep(0.2)

    threading.Thread(target=watch, daemon=True).start()

    def square(value: int) -> tuple[int, str]:
        time.sleep(seconds)
        return value * value, address_towards(bridge)

    started = time.monotonic()
    results = sc.parallelize(range(tasks), tasks).map(square).collect()
    return {"sum": sum(value for value, _ in results), "addresses": [address for _, address in results],
            "seconds": round(time.monotonic() - started, 1)}


def main(arguments: list[str]) -> None:
    """Run one mode and print its result."""
    spark = SparkSession.builder.appName(f"cluster-shape-{arguments[0]}").getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    if arguments[0] == "storage":
        result = storage(spark, *arguments[1:5])
    else:
        result = slow(spark, arguments[1], int(arguments[2]), float(arguments[3]))
    print("RESULT " + json.dumps(result), flush=True)
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
