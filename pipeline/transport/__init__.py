"""The fleet: the dispatcher service and fetch nodes joined over RabbitMQ (Celery, kombu).

- ``dispatcher_service``: CrawlCore behind the broker (``dispatcher_inbox``: what arrives on it);
  ``linkjobs`` / ``linkrules``: the link-jobs service and the crawl rules it reads; ``tasks``: the Celery task shim;
  ``taskmsg``: what a task message must look like; ``runtime``: a fetch node's long-lived loop.
- ``amqp``, ``topology``, ``messages``: queues, exchanges and the JSON on them.
- ``lease``, ``recovery``, ``fleet_state``, ``session``: leases and crash recovery.
- ``cli``: ``crawlfleet dispatcher``, ``worker`` and ``submit``.

May import: pipeline.crawl and everything below it; never pipeline.embedded or the harness.
"""
