"""Fault injection under the store interface: a failing, full or stalled disk, on demand.

``GroupCommitWriter.faults`` is a ``StoreFaults``. The writer consults it inside each transaction, after the
statements ran and just before COMMIT, so an injected failure takes the real rollback path: the transaction
is rolled back, its writes are reported ``ok=False`` and their journal seq numbers are reused.

- ``fail_next(n)``: the next ``n`` transactions fail (a transient disk error).
- ``set_failing(True)``: every transaction fails until ``set_failing(False)`` (a full or dead disk).
- ``set_stalled(True)``: the writer takes the next submitted write and then waits, before it drains the queue
  and begins the transaction, until ``set_stalled(False)`` (a slow disk). Writes submitted meanwhile pile up
  and then share one transaction, which makes group commit observable in tests.
- ``set_reads_failing(True)``: reading a group back from the store (its reload after a failed write) fails until
  ``set_reads_failing(False)`` (a store that cannot be read for a while: etcd defragmenting, a disk gone bad).

All methods are thread-safe. Production code never calls them; the disabled checks cost one lock round trip.
"""

from __future__ import annotations

import sqlite3
import threading


class InjectedDiskError(sqlite3.OperationalError):
    """The error an injected fault raises, shaped like SQLite's own disk I/O error."""


class StoreFaults:
    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._fail_next = 0
        self._failing = False
        self._stalled = False
        self._reads_failing = False
        self.injected = 0  # how many transactions an injected fault has failed so far

    def fail_next(self, n: int = 1) -> None:
        with self._lock:
            self._fail_next += n

    def set_failing(self, failing: bool) -> None:
        with self._lock:
            self._failing = failing

    def set_stalled(self, stalled: bool) -> None:
        with self._lock:
            self._stalled = stalled
            self._lock.notify_all()

    def set_reads_failing(self, failing: bool) -> None:
        with self._lock:
            self._reads_failing = failing

    def raise_if_reads_failing(self) -> None:
        """Called before a group is read back from the store; raises as a failed read would."""
        with self._lock:
            if not self._reads_failing:
                return
            self.injected += 1
        raise InjectedDiskError("disk I/O error reading the store (injected by StoreFaults)")

    def wait_while_stalled(self) -> None:
        with self._lock:
            self._lock.wait_for(lambda: not self._stalled)

    def raise_if_failing(self) -> None:
        """Called by the writer inside an open transaction; raises to make it roll back."""
        with self._lock:
            if not (self._failing or self._fail_next):
                return
            if self._fail_next:
                self._fail_next -= 1
            self.injected += 1
        raise InjectedDiskError("disk I/O error (injected by StoreFaults)")
