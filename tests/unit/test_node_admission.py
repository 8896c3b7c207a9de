"""Which batches a fetch worker process runs, from the incarnation a batch is addressed to."""

from __future__ import annotations

from fetchers.records import Batch, UrlTask
from pipeline.transport.node.admission import Admission, admit, batch_key


def test_unaddressed_batches_run() -> None:
    assert admit(None, "p1/0", running=False) is Admission.RUN
    assert admit("", "p1/3", running=False) is Admission.RUN


def test_a_batch_for_this_process_at_this_epoch_runs() -> None:
    assert admit("p1/2", "p1/2", running=False) is Admission.RUN


def test_another_process_batch_is_stale_even_if_it_names_our_epoch() -> None:
    assert admit("p0/2", "p1/2", running=False) is Admission.STALE
    assert admit("p0/2", "p1/2", running=True) is Admission.STALE


def test_an_earlier_epoch_batch_is_handed_back_unless_it_is_already_running() -> None:
    assert admit("p1/1", "p1/2", running=False) is Admission.LAPSED
    assert admit("p1/1", "p1/2", running=True) is Admission.RUN  # a redelivery joins the running fetch


def test_the_batch_key_tells_two_crawls_batch_n_apart() -> None:
    a = Batch(7, "n1#0", [UrlTask("http://a.test/", 1)], issued_at=1.0, service="crawl-a")
    b = Batch(7, "n1#0", [UrlTask("http://a.test/", 1)], issued_at=1.0, service="crawl-b")
    assert batch_key(a) != batch_key(b)
    assert batch_key(a) == ("crawl-a", 7, 1.0)
