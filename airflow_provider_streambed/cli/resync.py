"""``streambed resync``: one run of a group that copies its tables again (``refresh_once(resync=True)``).

For a group whose replication slot was lost (``wal_status = 'lost'``) or dropped: the changes
since the last cut cannot be decoded any more, so the run drops what is left of the slot,
creates a new one, copies every mirrored table at its consistent point and publishes the copies
(with the changes up to the run's W) as a new cut. The older cuts stay readable. It takes the
arguments of ``streambed refresh``; ``--run-key`` retries a failed resync with its copies.

With ``--member M`` (repeatable) only those mirrors are copied again, at a snapshot consistent
with the run's W (``refresh_once(resync_members=...)``); the slot stays and the other members
keep merging.
"""

from __future__ import annotations

import argparse

from airflow_provider_streambed.cli import refresh

run = refresh.run


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``streambed resync``: those of ``streambed refresh``."""
    refresh.add_arguments(parser)
    parser.add_argument("--member", action="append", default=[], dest="members", metavar="MEMBER",
                        help="copy only this mirror again (repeatable); default: every table, at a new slot")
    parser.set_defaults(resync=True)
