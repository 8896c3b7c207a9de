"""Fault trials: kill or stop one process of a running crawl, then account for every URL.

``accounting`` judges a trial from outside the crawler: the testbed's access log, the web's truth, the
store, and the injector's own record of the strike (``Strike``: processes, signal, times): pages lost,
and repeated requests, excused only when the struck process itself had them in flight (or made them in
its last second). ``embedded``, ``fleet_trials``,
``services``, ``jobs_trial``, ``storage_trials`` (the HBase data JVM), ``links_trial`` (the link jobs
inside a round, local and spark runners) and ``quota_trial`` (S1 across a dispatcher restart) run the
trials; ``procs``, ``bed``, ``fleet``, ``hbase_private`` and ``snapshot`` are their plumbing.

May import: pipeline.harness.testbed and everything in the crawl below it.
"""
