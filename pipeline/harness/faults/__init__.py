"""Fault trials: kill or stop one process of a running crawl, then account for every URL.

``accounting`` judges a trial from the testbed's access log and the store: lost, duplicated, or a
repeat of a request in flight on the killed process (``Killed`` names it). ``embedded``, ``fleet_trials``,
``services``, ``jobs_trial``, ``storage_trials`` (the HBase data JVM), ``links_trial`` (the link jobs
inside a round, local and spark runners) and ``quota_trial`` (S1 across a dispatcher restart) run the
trials; ``procs``, ``bed``, ``fleet``, ``hbase_private`` and ``snapshot`` are their plumbing.

May import: pipeline.harness.testbed and everything in the crawl below it.
"""
