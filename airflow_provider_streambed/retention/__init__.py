"""Cut retention: which cuts expire (:mod:`.plan`), expiring them in one atomic commit
(:mod:`.expiry`, and folded into each publish), deleting the files nothing needs any more
(:mod:`.gc`), and running both for a group (:mod:`.maintenance`).

Retention sits above :mod:`airflow_provider_streambed.publish`, which never imports it: what a
commit removes, and its staging, live in :mod:`airflow_provider_streambed.publish.expiry`; the
policy hands a publish its planner (:func:`.plan.publish_expiry`), and the caller of a publish
applies the rest right after it (:func:`.maintenance.apply_retention_after_publish`).
"""
