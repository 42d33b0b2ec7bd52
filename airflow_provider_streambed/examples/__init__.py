"""Functions used by the example DAGs; part of the package so Spark drivers can import them."""
