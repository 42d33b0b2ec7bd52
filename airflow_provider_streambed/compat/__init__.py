"""What differs between the supported versions of a dependency, one module per dependency (DESIGN §20).

Code elsewhere asks these modules, never a version number: :mod:`.spark` for the Spark lines the
refresh job and the readers run on (3.5 to 4.3). Each module runs wherever its caller runs.
"""
