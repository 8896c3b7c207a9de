"""The dispatcher (issue #5): S3 batch sizing, S1 quota admission, liveness, serial ids.

``Dispatcher`` (dispatcher.py) composes the pure rules in sizing.py, admission.py, liveness.py and
serials.py over any ``FrontierLike`` (protocols.py); roster.py keeps the fetchers (state, liveness, the
fleet average) and ledger.py the batches out and the closed serials. nodechoice.py is S1's choice of a
fleet node (u = p*s + q - r), which the fleet's node table applies before a node's fetcher is offered
work. quotashares.py divides S1's budget of a minute among dispatcher shards. memfrontier.py is a reference frontier for tests and the bench's simulations.

May import: pipeline.settings, fetchers (records). Pure: no I/O, clocks injected.
"""

from pipeline.dispatch.dispatcher import Dispatcher
from pipeline.dispatch.protocols import DispatcherStats, FrontierLike, Heartbeat, Refusal
from pipeline.dispatch.quotas import Quotas
from pipeline.dispatch.serials import SerialAllocator

__all__ = ["Dispatcher", "DispatcherStats", "FrontierLike", "Heartbeat", "Quotas", "Refusal", "SerialAllocator"]
