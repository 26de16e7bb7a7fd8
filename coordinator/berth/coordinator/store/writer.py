"""``GroupCommitWriter``: one daemon thread that commits queued writes in shared transactions (group commit).

What it owns: the queue between the event loop and the disk, batching, and reporting each write's outcome.
``QueuedWriter`` is the queue and the thread; ``GroupCommitWriter`` commits to SQLite, ``etcd.EtcdWriter`` to etcd.

Rules:
- ``submit`` is the event loop's hot path: it only enqueues (thread-safe, never blocks, keeps order). All
  encoding happens on the writer thread.
- The thread takes everything queued (up to ``max_batch_writes``) into ONE transaction, so one fsync covers
  as many writes as arrived while the previous transaction was committing.
- After each transaction, and before telling anyone, it appends the batch's journal events to the segments,
  then calls ``on_done([(token, ok), ...])`` on the writer thread, in submission order; the caller hops to
  its event loop itself. A failed transaction reports every write in it ``ok=False`` and its journal seq
  numbers are reused by the next transaction. A write whose content cannot be stored fails alone.
- ``flush`` returns once everything submitted before it is reported; ``close`` flushes and stops.
- ``healthy`` says whether the last transaction committed (a write rejected for its content says nothing
  about the disk), and ``failure`` why not (one line, for readiness and logs; empty while healthy). ``probe``
  queues one small transaction that only touches the ``meta`` table (the SQLite store; a probe key on etcd), so
  that a store that failed can be seen to work again when no other write comes (readiness, docs/api.md §10).
- ``stats`` (a ``TransactionStats``) is what the committed transactions took: how long the store took to commit
  each, the writes they carried, and the time spent turning writes into rows with no transaction in flight.
- ``faults`` (a ``StoreFaults``) injects disk failures inside the transaction, for tests.
- A submitted ``Write`` must not be mutated afterwards (the thread reads it later).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Self

from berth.coordinator.core import Write
from berth.coordinator.daemon import failpoints
from berth.coordinator.store.batch import prepare_batch
from berth.coordinator.store.errors import StoreError
from berth.coordinator.store.faults import StoreFaults
from berth.coordinator.store.sqlite_store import SqliteStore

log = logging.getLogger(__name__)

OnDone = Callable[[list[tuple[int, bool]]], object]  # the result is ignored
_STOP = None  # queued by close(): the thread finishes what is before it and exits


#: Upper bounds of the transaction-time histogram (seconds): from an fsync on a fast disk to an etcd that stalls.
TRANSACTION_BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


@dataclass(slots=True)
class TransactionStats:
    """What the writer's committed transactions took (docs/api.md §10, ``berth_store_transaction_*``). Kept on the
    writer thread, read at a scrape: a reader may see one transaction's figures partly counted.

    ``seconds`` is the store's part (SQLite's statements and fsync; etcd's round trip, resends included),
    ``preparing_seconds`` the writer's own before it (checking, folding and encoding the writes into rows): no
    transaction is in flight meanwhile, so it adds to every write's latency.
    """

    counts: list[int] = field(default_factory=lambda: [0] * (len(TRANSACTION_BUCKETS_S) + 1))  # last: +Inf
    seconds: float = 0.0
    writes: int = 0
    preparing_seconds: float = 0.0

    def committed(self, seconds: float, writes: int) -> None:
        self.counts[bisect_left(TRANSACTION_BUCKETS_S, seconds)] += 1
        self.seconds += seconds
        self.writes += writes


class _Probe:
    """Queued by ``probe``: a transaction of its own that tells whether the disk takes writes."""


_PROBE = _Probe()
_QueueItem = Write | threading.Event | _Probe | None  # an Event is a flush marker, set once all before it is done


class QueuedWriter:
    """The queue, the thread, flush markers and probes; subclasses commit (``_commit``) and probe (``_probe``)."""

    #: Named in errors (the data dir, the etcd prefix).
    where: str = "the store"

    def __init__(self, on_done: OnDone, *, max_batch_writes: int = 5000) -> None:
        if max_batch_writes < 1:
            raise ValueError("max_batch_writes must be at least 1")
        self.faults = StoreFaults()
        self.transactions = 0  # committed or rolled back, for tests
        self.stats = TransactionStats()
        self._on_done = on_done
        self._max_batch_writes = max_batch_writes
        self._queue: queue.SimpleQueue[_QueueItem] = queue.SimpleQueue()
        self._closed = False
        self.healthy = True  # the last transaction committed (read from any thread: a bool is atomic)
        self.failure = ""  # why it did not (set before ``healthy`` goes false)
        self._probe_queued = threading.Event()
        self._thread = threading.Thread(target=self._run, name="berth-store-writer", daemon=True)

    def start(self) -> Self:
        self._thread.start()
        return self

    def submit(self, write: Write) -> None:
        if self._closed:
            raise StoreError(f"store writer for {self.where} is closed")
        self._queue.put(write)

    def probe(self) -> None:
        """Queue a probe transaction unless one is already waiting (thread-safe, never blocks)."""
        if self._closed or self._probe_queued.is_set():
            return
        self._probe_queued.set()
        self._queue.put(_PROBE)

    def flush(self, timeout: float | None = None) -> bool:
        """Block until every write submitted so far is reported; False if ``timeout`` ran out first.

        Never call it from ``on_done``: that runs on the writer thread, which would wait for itself.
        """
        if not self._thread.is_alive():
            return True
        marker = threading.Event()
        self._queue.put(marker)
        return marker.wait(timeout)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Finish every submitted write, then stop the thread. The store stays open (close it afterwards)."""
        if self._closed:
            return
        self._closed = True
        self._queue.put(_STOP)
        self._thread.join()

    # ------------------------------------------------------------------------------------- writer thread

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            self.faults.wait_while_stalled()
            writes: list[Write] = []
            markers: list[threading.Event] = []
            probing = [False]
            stopping = self._take(first, writes, markers, probing)
            while not stopping and len(writes) < self._max_batch_writes:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                stopping = self._take(item, writes, markers, probing)
            transacted = self._commit(writes) if writes else False
            if probing[0] and not transacted:
                self._probe()  # a transaction of writes is a probe of its own
            for marker in markers:
                marker.set()
            if stopping:
                return

    def _take(self, item: _QueueItem, writes: list[Write], markers: list[threading.Event], probing: list[bool]) -> bool:
        if item is _STOP:
            return True
        if isinstance(item, threading.Event):
            markers.append(item)
        elif isinstance(item, _Probe):
            self._probe_queued.clear()
            probing[0] = True
        else:
            writes.append(item)
        return False

    def _probe(self) -> None:
        raise NotImplementedError

    def _failing(self, why: str) -> None:
        self.failure = why
        self.healthy = False

    def _recovered(self, says: str) -> None:
        if not self.healthy:
            log.info("store: %s", says)
        self.healthy = True
        self.failure = ""

    def _commit(self, writes: list[Write]) -> bool:
        """Commit the writes and report them; whether a transaction was attempted."""
        raise NotImplementedError

    def _report(self, outcomes: list[tuple[int, bool]]) -> None:
        try:
            self._on_done(outcomes)
        except Exception:
            log.exception("store: on_done raised; the writer carries on")


class GroupCommitWriter(QueuedWriter):
    """Commits to SQLite: everything queued in one transaction, one fsync."""

    def __init__(self, store: SqliteStore, on_done: OnDone, *, max_batch_writes: int = 5000) -> None:
        super().__init__(on_done, max_batch_writes=max_batch_writes)
        self.store = store
        self.where = str(store.data_dir)
        self.start()

    def _probe(self) -> None:
        try:
            self.store.probe_write(before_commit=self.faults.raise_if_failing)
        except Exception as exc:
            log.warning("store: the disk still refuses writes: %s", exc)
            self._failing(f"the disk refuses writes: {' '.join(str(exc).split())}")
        else:
            self._recovered("the disk takes writes again")

    def _commit(self, writes: list[Write]) -> bool:
        """Commit the writes in one transaction and report them; whether a transaction was attempted."""
        lines: list[tuple[int, str]] = []
        transacted = False
        try:
            started = time.perf_counter()
            batch = prepare_batch(writes)
            if batch.accepted_tokens:
                self.transactions += 1
                transacted = True
                prepared = time.perf_counter()
                self.stats.preparing_seconds += prepared - started
                lines = self.store.commit_batch(batch, before_commit=self._before_commit)
                self.stats.committed(time.perf_counter() - prepared, len(batch.accepted_tokens))
        except Exception as exc:
            log.exception("store: transaction of %d writes failed and was rolled back", len(writes))
            outcomes = [(write.token, False) for write in writes]
            self._failing(f"the disk refuses writes: {' '.join(str(exc).split())}")
        else:
            outcomes = batch.outcomes
            if batch.accepted_tokens:
                self._recovered("the disk takes writes again")
            # Committed: from here on nothing may report these writes failed. Segments repair themselves.
            failpoints.hit("store.after_commit")
            self.store.segments.append(lines)
            failpoints.hit("journal.after_append")
        self._report(outcomes)
        return transacted

    def _before_commit(self) -> None:
        """Inside the transaction, before it commits: the disk faults of the tests and the failpoint."""
        self.faults.raise_if_failing()
        failpoints.hit("store.before_commit")
