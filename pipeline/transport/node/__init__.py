"""A fetch node (``crawlfleet worker``): one Celery worker, its long-lived fetch loop, where its pages go.

May import: ``pipeline.transport.wire`` and the rooms below pipeline.transport.
"""
