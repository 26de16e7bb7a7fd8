"""Who is the active replica: a leader key on an etcd lease (``EtcdElection``), and one tenure of it (``Tenure``).

Rules:
- A replica campaigns by creating ``P leader`` on a fresh lease, only if the key does not exist (one txn). Losing,
  it watches the key and campaigns again once it is deleted (the holder's lease expired or was revoked): a standby
  takes over about one lease TTL after the active replica died, at once after it stepped down.
- Winning starts a ``Tenure``: its ``Term`` (the key's create revision) fences every write in etcd (``store``).
  The tenure also keeps a local deadline, the send time of the last successful keep-alive plus the TTL etcd
  granted: the lease cannot expire before it (etcd's clock starts later), so a replica that is past it may
  already be replaced. ``acting()`` is false from then on, and the tenure ends: a replica frozen past its lease
  (SIGSTOP) stops answering from its memory the moment it runs again, before any keep-alive told it anything.
- A tenure ends, once and for good, when the deadline passes, when a keep-alive finds the lease gone, when a write
  is refused on its term (``Fenced``), when the leader key is gone or not this term's (``_guard``), or when the
  replica steps down (``resign``: the lease is revoked, which deletes the key, so a standby need not wait out the
  TTL). ``on_end`` callbacks run on the thread that ended it.
- The active replica watches its own key (a thread per tenure, ``_guard``): the lease may outlive its key (someone
  deleted it, or a copy restored an older prefix), and a standby then wins a new term at once. Without the watch the
  old replica would keep answering from memory until its first write was refused; with it, the term ends within a
  watch event of the deletion. The watch only wakes the guard: each time, a read of the key decides.
- Keep-alives go every TTL/3; a failed one is retried every ``RETRY_S`` until the deadline.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable

from berth.coordinator.daemon import failpoints
from berth.coordinator.store.etcd.client import EtcdClient, EtcdError, KeyValue, WatchStream, b64
from berth.coordinator.store.etcd.keys import Keys
from berth.coordinator.store.etcd.store import Term

log = logging.getLogger(__name__)

RETRY_S = 0.5
#: Subtracted from the local deadline: scheduling delays between reading the clock and sending the keep-alive.
DEADLINE_MARGIN_S = 0.25
#: A watch that has said nothing this long is re-established (and the key looked at again).
WATCH_TIMEOUT_S = 30.0


class Tenure:
    """One term as the active replica, from the campaign it won to its end (thread-safe)."""

    def __init__(self, term: Term, valid_until: float) -> None:
        self.term = term
        self._valid_until = valid_until
        self._lock = threading.Lock()
        self._ended = threading.Event()
        self.reason = ""
        self._listeners: list[Callable[[Tenure], None]] = []

    @property
    def ended(self) -> bool:
        return self._ended.is_set()

    def acting(self) -> bool:
        """Still sure to lead: not ended and within the local deadline (cheap: one clock read)."""
        return not self._ended.is_set() and time.monotonic() < self._valid_until

    def extend(self, sent_at: float, ttl_s: int) -> bool:
        """A keep-alive sent at ``sent_at`` renewed the lease for ``ttl_s``; False (and the tenure ends) when the
        deadline had already passed: another replica may have led meanwhile."""
        with self._lock:
            if self._ended.is_set():
                return False
            if time.monotonic() >= self._valid_until:
                expired = True
            else:
                expired = False
                self._valid_until = max(self._valid_until, sent_at + ttl_s - DEADLINE_MARGIN_S)
        if expired:
            self.end("the lease deadline passed before the keep-alive was answered")
        return not expired

    def remaining_s(self) -> float:
        return self._valid_until - time.monotonic()

    def on_end(self, callback: Callable[[Tenure], None]) -> None:
        with self._lock:
            if not self._ended.is_set():
                self._listeners.append(callback)
                return
        callback(self)

    def end(self, reason: str) -> None:
        with self._lock:
            if self._ended.is_set():
                return
            self.reason = reason
            self._ended.set()
            listeners, self._listeners = self._listeners, []
        log.warning("ha: term %d ended: %s", self.term.revision, reason)
        for callback in listeners:
            try:
                callback(self)
            except Exception:
                log.exception("ha: a term-end callback raised")

    def wait_ended(self, timeout_s: float) -> bool:
        return self._ended.wait(timeout_s)


class EtcdElection:
    """Campaigns in a thread of its own; ``on_elected(tenure)`` is called on that thread for each tenure won."""

    def __init__(
        self,
        client: EtcdClient,
        keys: Keys,
        *,
        name: str,
        ttl_s: int,
        on_elected: Callable[[Tenure], None],
    ) -> None:
        if ttl_s < 2:
            raise ValueError("the lease TTL must be at least 2 s")
        self.client = client
        self.keys = keys
        self.name = name
        self.ttl_s = ttl_s
        self.on_elected = on_elected
        self.tenure: Tenure | None = None
        self._stop = threading.Event()
        self._watch: WatchStream | None = None
        self._thread = threading.Thread(target=self._run, name="berth-election", daemon=True)

    def start(self) -> EtcdElection:
        self._thread.start()
        return self

    def resign(self) -> None:
        """Step down for good (shutdown): stop campaigning, end the tenure, revoke its lease (deletes the key)."""
        self._stop.set()
        watch = self._watch
        if watch is not None:
            watch.close()
        tenure = self.tenure
        if tenure is not None:
            tenure.end("stepping down")
        self._thread.join(timeout=self.client.timeout_s + 1)

    # ------------------------------------------------------------------------------------- the thread

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                tenure = self._campaign()
            except EtcdError as exc:
                log.warning("ha: campaign failed, retrying: %s", exc)
                self._stop.wait(RETRY_S)
                continue
            if tenure is None:
                continue
            self.tenure = tenure
            log.info("ha: %s is the active replica (term %d)", self.name, tenure.term.revision)
            if not failpoints.enabled("bug.ignore_leader_key"):
                threading.Thread(target=self._guard, args=(tenure,), name="berth-leader-guard", daemon=True).start()
            try:
                self.on_elected(tenure)
            except Exception:
                log.exception("ha: on_elected raised")
                tenure.end("could not start the term")
            self._keep(tenure)
            self._revoke(tenure.term.lease)
            self.tenure = None

    def _campaign(self) -> Tenure | None:
        """One attempt: the tenure won, or None after the holder's key went away (or a watch ended)."""
        sent_at = time.monotonic()
        lease, granted = self.client.lease_grant(self.ttl_s)
        keys = self.keys
        value = json.dumps({"name": self.name, "pid": os.getpid(), "host": socket.gethostname()}).encode()
        answer = self.client.txn(
            [{"key": b64(keys.leader), "target": "CREATE", "result": "EQUAL", "create_revision": 0}],
            [{"request_put": {"key": b64(keys.leader), "value": b64(value), "lease": lease}}],
            [{"request_range": {"key": b64(keys.leader)}}],
        )
        if answer.get("succeeded"):
            revision = int(answer["header"]["revision"])
            return Tenure(Term(lease, revision, self.name), sent_at + granted - DEADLINE_MARGIN_S)
        ranged = answer.get("responses", [{}])[0].get("response_range", {}).get("kvs", [])
        holder = KeyValue.of(ranged[0]) if ranged else None
        if holder is not None and holder.lease == lease:  # cannot happen with a fresh lease; kept for clarity
            return Tenure(Term(lease, holder.create_revision, self.name), sent_at + granted - DEADLINE_MARGIN_S)
        self._revoke(lease)
        if holder is None:
            return None  # it went away in between: campaign again at once
        log.info("ha: standing by; the active replica is %s", _holder_name(holder.value))
        self._wait_for_vacancy(holder.mod_revision + 1)
        return None

    def _wait_for_vacancy(self, from_revision: int) -> None:
        watch = self.client.watch(self.keys.leader, from_revision, WATCH_TIMEOUT_S)
        self._watch = watch
        try:
            if self._stop.is_set():
                return
            for event in watch.events():
                if event.get("type") == "DELETE":
                    return
        except EtcdError:
            return  # timed out, closed, or etcd went away: look at the key again
        finally:
            self._watch = None

    def _guard(self, tenure: Tenure) -> None:
        """End the tenure once the leader key is gone or belongs to another term; runs until the tenure ends."""
        watches: list[WatchStream] = []

        def stop_watching(_tenure: Tenure) -> None:
            for watch in watches:
                watch.close()

        tenure.on_end(stop_watching)
        while not tenure.ended and not self._stop.is_set():
            try:
                found, revision, _, _ = self.client.range(self.keys.leader)
            except EtcdError as exc:  # etcd out of reach: the lease deadline covers that
                log.debug("ha: reading the leader key failed: %s", exc)
                tenure.wait_ended(RETRY_S)
                continue
            if not found:
                tenure.end("the leader key was deleted")
                return
            if found[0].create_revision != tenure.term.revision:
                tenure.end(f"the leader key is now {_holder_name(found[0].value)}'s")
                return
            watch = self.client.watch(self.keys.leader, revision + 1, WATCH_TIMEOUT_S)
            watches[:] = [watch]
            if tenure.wait_ended(0):  # it ended before the watch could be closed by it
                return
            try:
                for _event in watch.events():
                    break  # something changed: read the key again
            except EtcdError:
                pass  # timed out or closed: read the key again

    def _keep(self, tenure: Tenure) -> None:
        """Renew the lease every TTL/3 (a failed renewal is retried every ``RETRY_S``) until the tenure ends."""
        interval = self.ttl_s / 3
        next_at = time.monotonic() + interval
        while True:
            if tenure.wait_ended(max(0.0, min(next_at - time.monotonic(), tenure.remaining_s()))):
                return
            if not tenure.acting():
                tenure.end("the lease deadline passed without a renewal")
                return
            sent_at = time.monotonic()
            try:
                ttl = self.client.lease_keepalive(tenure.term.lease)
            except EtcdError as exc:
                log.warning("ha: lease keep-alive failed (%.1f s left): %s", tenure.remaining_s(), exc)
                next_at = time.monotonic() + RETRY_S
                continue
            if ttl <= 0:
                tenure.end("the lease expired")
                return
            tenure.extend(sent_at, ttl)
            next_at = sent_at + interval

    def _revoke(self, lease: int) -> None:
        try:
            self.client.lease_revoke(lease)
        except EtcdError as exc:
            log.info("ha: could not revoke lease %x (it expires by itself): %s", lease, exc)


def _holder_name(value: bytes) -> str:
    try:
        return str(json.loads(value)["name"])
    except (ValueError, TypeError, KeyError):
        return "unknown"
