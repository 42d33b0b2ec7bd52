"""The "Streambed" page of the Airflow UI: the groups, their cuts and their freshness.

:mod:`.page` renders HTML from plain records (no I/O), :mod:`.app` is the FastAPI app that reads
the ledgers through the catalog connections :mod:`.connections` finds, and :mod:`.plugin`
registers both with Airflow. Runs in Airflow's api-server.
"""
