"""``streambed spark-connect start|stop|status``: a local Spark Connect server from the pyspark wheel.

For trying the Spark Connect path without a cluster: ``start`` prints the URL to give to
``streambed refresh --spark-remote`` (or to an Airflow connection of type ``spark_connect``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from airflow_provider_streambed.exceptions import RefreshError
from airflow_provider_streambed.refresh.spark.connect_server import DEFAULT_PORT, DEFAULT_STATE_DIR, ConnectServer


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``streambed spark-connect``."""
    parser.add_argument("action", choices=("start", "stop", "status"), help="what to do")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"gRPC port (default {DEFAULT_PORT})")
    parser.add_argument("--master", default="local[2]", help="the server's Spark master (default local[2])")
    parser.add_argument("--state-dir", type=Path, default=DEFAULT_STATE_DIR,
                        help=f"where the pid file and log live (default {DEFAULT_STATE_DIR})")


def run(args: argparse.Namespace) -> int:
    """Handle ``streambed spark-connect``; returns the exit code."""
    server = ConnectServer(port=args.port, master=args.master, state_dir=args.state_dir)
    if args.action == "start":
        try:
            url = server.start()
        except RefreshError as error:
            print(f"error: {error}")
            return 1
        print(f"Spark Connect server listening at {url} (log: {server.log_file})")
    elif args.action == "stop":
        print("stopped" if server.stop() else f"no server running on port {args.port}")
    else:
        running = server.running_pid() is not None and server.accepts_connections()
        print(f"running at {server.url}" if running else f"not running on port {args.port}")
        return 0 if running else 3
    return 0
