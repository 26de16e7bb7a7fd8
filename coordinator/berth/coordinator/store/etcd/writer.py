"""``EtcdWriter``: group commit into etcd transactions, under one tenure (the writer of one term).

Rules (besides ``QueuedWriter``'s: one thread, everything queued goes into one transaction when it fits):
- A run of writes becomes one transaction (``txn.build``) when it fits etcd's limits; otherwise it is split in
  halves until each part fits, and a single write that cannot fit is refused alone (logged; answered as a failed
  write: COORDINATOR_NOT_AVAILABLE). A write is never split over transactions: each is all or nothing.
- A write is reported done (``ok=True``) only once etcd committed its transaction: no answer is released before.
- A transaction whose answer was lost (connection, timeout, etcd's leader changing) is sent again, the same one,
  until it is answered: the progress key makes a second copy a no-op (``store.commit``), so it applies once.
- Whether a write may still commit is etcd's to say, not the local lease deadline's: a writer whose tenure ended
  locally (a frozen replica that resumed) still sends what it holds, and etcd refuses it on the term.
- A transaction refused on the term (``Fenced``) ends the tenure: that write and every later one is reported
  failed, so nothing this replica does from then on is acknowledged. So does running out of the tenure
  while retrying (etcd unreachable past the lease): the answers are withheld, the replica steps back.
- A transaction etcd refuses for itself (too large: a limit set lower in etcd than here) fails its writes only;
  one refused because etcd is out of space (its NOSPACE alarm) also makes the store unhealthy (readiness is 503
  ``store failing``, saying so) until a probe write is taken again.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Sequence

from berth.coordinator.core import Write
from berth.coordinator.daemon import failpoints
from berth.coordinator.store.etcd.client import EtcdError, EtcdRefused, EtcdUnavailable
from berth.coordinator.store.etcd.election import Tenure
from berth.coordinator.store.etcd.store import EtcdStore, Fenced
from berth.coordinator.store.etcd.txn import Built, build, fitting
from berth.coordinator.store.faults import InjectedDiskError
from berth.coordinator.store.writer import OnDone, QueuedWriter

log = logging.getLogger(__name__)

RETRY_S = 0.1
#: Writes per transaction at most (everything queued, up to this): a transaction is one raft entry.
MAX_BATCH_WRITES = 2_000


class EtcdWriter(QueuedWriter):
    def __init__(
        self, store: EtcdStore, tenure: Tenure, on_done: OnDone, *, max_batch_writes: int = MAX_BATCH_WRITES
    ) -> None:
        super().__init__(on_done, max_batch_writes=max_batch_writes)
        self.store = store
        self.tenure = tenure
        self.where = store.where
        self._txn_ids = itertools.count(1)
        self.fenced = False  # etcd refused a transaction on this term: every later write fails without asking
        self.start()

    # --------------------------------------------------------------------------------- writer thread

    def _probe(self) -> None:
        try:
            self.store.probe(self.tenure.term)
        except EtcdRefused as exc:
            log.warning("store: etcd still refuses writes: %s", exc)
            self._failing(_refusal(exc))
        except EtcdError as exc:
            log.warning("store: etcd still does not answer: %s", exc)
            self._failing(f"etcd does not answer: {exc}")
        else:
            self._recovered("etcd takes writes again")

    def _commit(self, writes: list[Write]) -> bool:
        pending: Sequence[Write] = writes
        transacted = False
        store = self.store
        while pending:
            if self.fenced:
                self._report([(w.token, False) for w in pending])
                return transacted
            started = time.perf_counter()
            try:
                take, built = fitting(
                    pending,
                    lambda run: build(
                        run, store.keys, store.epochs, store.index, store.retention, store.topic_offsets, store.slots
                    ),
                    store.limits,
                )
            except Exception:  # a bug: fail these writes, not the thread
                log.exception("store: building a transaction of %d writes failed", len(pending))
                self._report([(w.token, False) for w in pending])
                return transacted
            self.stats.preparing_seconds += time.perf_counter() - started
            head, pending = pending[:take], pending[take:]
            if not store.limits.fits(len(built.ops), built.size):
                self._refuse_oversized(head[0], built)
                continue
            transacted = transacted or built.accepted
            self._report(self._commit_one(built) if built.accepted else built.outcomes)
        return transacted

    def _refuse_oversized(self, write: Write, built: Built) -> None:
        limits = self.store.limits
        log.error(
            "store: refused write %d: it needs %d etcd operations and %d bytes, over what one transaction may"
            " hold (--etcd-max-txn-ops %d, --etcd-max-request-bytes %d, less what the writer keeps)",
            write.token,
            len(built.ops),
            built.size,
            limits.max_txn_ops,
            limits.max_request_bytes,
        )
        self._report([(write.token, False)])

    def _commit_one(self, built: Built) -> list[tuple[int, bool]]:
        """Commit one built transaction: its outcomes, all failed unless it committed."""
        failed = [(token, False) for token, _ in built.outcomes]
        tenure = self.tenure
        txn_id = f"{tenure.term.revision}-{next(self._txn_ids)}"
        try:
            self.faults.raise_if_failing()
            failpoints.hit("store.before_commit")
        except (InjectedDiskError, failpoints.FailpointError) as exc:
            log.error("store: transaction of %d writes failed: %s", len(built.outcomes), exc)
            self._failing(str(exc))
            return failed
        sent = time.perf_counter()
        while True:
            try:
                self.store.commit(built, tenure.term, txn_id)
            except Fenced as exc:
                log.error("store: %s", exc)
                self.fenced = True
                tenure.end(str(exc))
                return failed
            except EtcdRefused as exc:
                log.error("store: etcd refused a transaction of %d writes: %s", len(built.outcomes), exc)
                if out_of_space(exc) and not failpoints.enabled("bug.ready_while_refused"):
                    self._failing(_refusal(exc))
                return failed
            except EtcdUnavailable as exc:
                self._failing(f"etcd does not answer: {exc}")
                if not tenure.acting():
                    self.fenced = True  # no answer while the lease held: another replica may lead by now
                    tenure.end(f"etcd did not answer within the lease: {exc}")
                    return failed
                log.warning("store: transaction %s unanswered, sending it again: %s", txn_id, exc)
                time.sleep(RETRY_S)
                continue
            self.stats.committed(time.perf_counter() - sent, sum(1 for _, accepted in built.outcomes if accepted))
            self._recovered("etcd takes writes again")
            failpoints.hit("store.after_commit")
            return built.outcomes


#: gRPC's RESOURCE_EXHAUSTED: etcd's "mvcc: database space exceeded" (its NOSPACE alarm is raised).
RESOURCE_EXHAUSTED = 8


def out_of_space(exc: EtcdRefused) -> bool:
    return exc.code == RESOURCE_EXHAUSTED or "space exceeded" in str(exc)


def _refusal(exc: EtcdRefused) -> str:
    if out_of_space(exc):
        return "etcd is out of space (its NOSPACE alarm is raised: compact, defragment, then disarm it)"
    return f"etcd refuses writes: {exc}"
