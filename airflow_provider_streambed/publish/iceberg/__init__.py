"""Every use of pyiceberg's private API, fenced here behind functions and classes named for what they do.

Written against, and tested with, pyiceberg 0.12 (``pyproject.toml`` bounds it below 0.13);
``tests/unit/publish/iceberg/`` checks each internal relied on against the installed pyiceberg.
"""
