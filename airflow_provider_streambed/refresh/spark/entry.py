"""spark-submit entry script of a refresh (spark-submit runs a file, not a module)."""

from __future__ import annotations

import sys

from airflow_provider_streambed.refresh.spark.job import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
