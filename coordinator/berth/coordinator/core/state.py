"""The core's state and the per-call bookkeeping every handler shares.

``CoreState`` owns the groups, the committed offsets, the timer queue, and the accumulator of one call's
effects: replies, records, journal events and the continuations to run once the call's write is durable
(or has failed). Handlers in ``join``, ``membership``, ``offsets``, ``admin`` and ``rebalance`` are plain
functions over a ``CoreState``; ``Coordinator`` is the public facade that frames each call.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Unpack

from berth.coordinator.core.config import CoordinatorConfig
from berth.coordinator.core.effects import Effects, Response, Write
from berth.coordinator.core.events import EventFields, EventHeader, EventType, JournalEvent
from berth.coordinator.core.group import Group
from berth.coordinator.core.records import Record
from berth.coordinator.core.timers import TimerQueue
from berth.coordinator.core.usage import Ledger
from berth.coordinator.protocol import GroupId, InstanceId, MemberId, OffsetAndMetadata


# Timer payloads: what to do when a timer key falls due.
@dataclass(frozen=True, slots=True)
class CompleteJoin:
    """The join phase's rebalance timeout (or the 'stuck' re-check) ran out."""


@dataclass(frozen=True, slots=True)
class InitialRebalanceDelay:
    delay_ms: int
    remaining_ms: int


@dataclass(frozen=True, slots=True)
class SyncExpiry:
    generation_id: int


@dataclass(frozen=True, slots=True)
class SessionExpiry:
    """A member's (or pending id's) session, or a new member's join timeout, ran out."""


#: Session expiries carry nothing: one payload serves every session timer (a heartbeat allocates none).
SESSION_EXPIRY = SessionExpiry()


@dataclass(frozen=True, slots=True)
class ExpireGroups:
    """The periodic expiry of offsets and empty groups (Kafka's offsets retention check)."""


EXPIRE_GROUPS = ExpireGroups()


TimerPayload = CompleteJoin | InitialRebalanceDelay | SyncExpiry | SessionExpiry | ExpireGroups


def expiry_key() -> tuple[str]:
    return ("expiry",)


def join_key(group_id: GroupId) -> tuple[str, str]:
    return ("join", group_id)


def sync_key(group_id: GroupId) -> tuple[str, str]:
    return ("sync", group_id)


def heartbeat_key(group_id: GroupId, member_id: MemberId) -> tuple[str, str, str]:
    return ("heartbeat", group_id, member_id)


Continuation = Callable[[], None]


class CoreState:
    def __init__(self, config: CoordinatorConfig, new_uuid: Callable[[], str] | None = None) -> None:
        self.config = config
        self.new_uuid = new_uuid or (lambda: str(uuid.uuid4()))
        self.groups: dict[GroupId, Group] = {}
        self.offsets: dict[GroupId, dict[str, dict[int, OffsetAndMetadata]]] = {}
        # Stored bytes of all groups, and per tenant (``usage``); groups join them in ``register``.
        self.usage = Ledger(None, config.max_stored_bytes)
        self.tenants: dict[str, Ledger] = {}
        # Every KIP-394 id handed out, oldest first, to bound them in total (``pending``); entries of ids that
        # joined, left or expired stay until they reach the front.
        self.pending_ids: dict[tuple[GroupId, MemberId], None] = {}
        self.timers: TimerQueue[TimerPayload] = TimerQueue()
        self.now_ms = 0
        self.rebalances_by_cause: Counter[str] = Counter()
        self.groups_refused = 0  # requests that would have created a group beyond ``max_groups``
        self.fenced_answers = 0  # answers carrying FENCED_INSTANCE_ID (KIP-345 fencing), every one of them
        self._next_token = 1
        self._continuations: dict[int, tuple[list[Continuation], list[Continuation]]] = {}
        # One call's accumulators. Most calls (heartbeats) only reply: everything is created on first use.
        self._fx: Effects | None = None
        self._records: list[Record] | None = None
        self._events: list[JournalEvent] | None = None
        self._on_ok: list[Continuation] | None = None
        self._on_fail: list[Continuation] | None = None

    # ------------------------------------------------------------------------------------ call framing

    def begin(self, now_ms: int) -> None:
        self.now_ms = now_ms

    def finish(self) -> Effects:
        fx = self._fx or Effects()
        self._fx = None
        if self._records or self._events:
            token = self._next_token
            self._next_token += 1
            if self._on_ok or self._on_fail:
                self._continuations[token] = (self._on_ok or [], self._on_fail or [])
            fx.writes.append(Write(token, self._records or [], self._events or []))
            self._records = self._events = self._on_ok = self._on_fail = None
        return fx

    def run_continuations(self, token: int, ok: bool) -> None:
        on_ok, on_fail = self._continuations.pop(token, ([], []))
        for fn in on_ok if ok else on_fail:
            fn()

    def drop_continuations(self, token: int) -> None:
        self._continuations.pop(token, None)

    @property
    def pending_writes(self) -> int:
        return len(self._continuations)

    # ------------------------------------------------------------------------------------------ effects

    def reply(self, ticket: int, response: Response) -> None:
        fx = self._fx
        if fx is None:
            self._fx = Effects([(ticket, response)])
        else:
            fx.replies.append((ticket, response))

    def reply_on_own_write(self, ticket: int, response: Response) -> None:
        """Reply from a continuation with an answer that reveals nothing a later write of the group changes: it
        goes out once the continued write is durable, not held for the group's writes handed over since (which a
        busy group always has in flight: each of its replies would wait one transaction more)."""
        self.reply(ticket, response)
        fx = self._fx
        assert fx is not None
        if fx.own_write is None:
            fx.own_write = {ticket}
        else:
            fx.own_write.add(ticket)

    def withdraw_reply(self, ticket: int) -> Response | None:
        """Take back a reply made earlier in this call (to hold it until the call's write is durable)."""
        if self._fx is None:
            return None
        for i, (t, response) in enumerate(self._fx.replies):
            if t == ticket:
                del self._fx.replies[i]
                if self._fx.own_write:
                    self._fx.own_write.discard(ticket)
                return response
        return None

    def persist(self, record: Record) -> None:
        if self._records is None:
            self._records = []
        self._records.append(record)

    @property
    def call_persists_records(self) -> bool:
        return bool(self._records)

    def when_persisted(self, fn: Continuation) -> None:
        if self._on_ok is None:
            self._on_ok = []
        self._on_ok.append(fn)

    def when_persist_failed(self, fn: Continuation) -> None:
        if self._on_fail is None:
            self._on_fail = []
        self._on_fail.append(fn)

    def event(self, group: Group | GroupId, event_type: EventType, **fields: Unpack[EventFields]) -> None:
        """Append a journal event (docs/formats.md "Journal events"); the store assigns its ``seq`` at commit."""
        header: EventHeader
        if isinstance(group, Group):
            header = {
                "ts_ms": self.now_ms,
                "group_id": group.group_id,
                "type": event_type,
                "generation_id": group.generation_id,
            }
        else:
            header = {"ts_ms": self.now_ms, "group_id": group, "type": event_type}
        event: JournalEvent = {**header, **fields}
        if self._events is None:
            self._events = []
        self._events.append(event)

    # ------------------------------------------------------------------------------------------- timers

    def schedule(self, key: tuple[str, ...], delay_ms: int, payload: TimerPayload) -> None:
        self.timers.schedule(key, self.now_ms + delay_ms, payload)

    def cancel(self, key: tuple[str, ...]) -> None:
        self.timers.cancel(key)

    # ------------------------------------------------------------------------------------------- groups

    def new_group(self, group_id: GroupId, tenant: str | None = None) -> Group:
        group = Group(group_id, self.now_ms, tenant=tenant)
        self.register(group)
        self.event(group, EventType.GROUP_CREATED)
        return group

    def ledgers_for(self, tenant: str | None, *, keep: bool = False) -> tuple[Ledger, ...]:
        """The ledgers a group of ``tenant`` counts in: all groups', and its tenant's (a fresh one, kept only with
        ``keep``: a tenant's ledger exists while it has groups)."""
        if tenant is None:
            return (self.usage,)
        ledger = self.tenants.get(tenant)
        if ledger is None:
            config = self.config
            ledger = Ledger(tenant, config.max_stored_bytes_per_tenant, config.max_groups_per_tenant)
            if keep:
                self.tenants[tenant] = ledger
        return (self.usage, ledger)

    def register(self, group: Group) -> None:
        """Hold ``group`` (replacing nothing: the caller forgot any group of that id first) and count it."""
        assert group.group_id not in self.groups, group
        self.groups[group.group_id] = group
        ledgers = group.usage.ledgers = self.ledgers_for(group.tenant, keep=True)
        size = group.stored_bytes()
        for ledger in ledgers:
            ledger.bytes += size
            ledger.groups += 1

    def forget(self, group_id: GroupId) -> Group | None:
        """Stop holding the group (its offsets are the caller's to drop) and uncount it; the group object keeps its
        figures, so that ``register`` can put it back as it was."""
        group = self.groups.pop(group_id, None)
        if group is None:
            return None
        size = group.stored_bytes()
        for ledger in group.usage.ledgers:
            ledger.bytes -= size
            ledger.groups -= 1
            if ledger.tenant is not None and ledger.groups == 0:
                del self.tenants[ledger.tenant]
        group.usage.ledgers = ()
        return group

    def generate_member_id(self, client_id: str | None, group_instance_id: InstanceId | None) -> MemberId:
        """``<prefix>-<uuid4>``: the instance id, else the client id, else ``member`` (docs/api.md §11)."""
        prefix = group_instance_id if group_instance_id is not None else (client_id or "member")
        return MemberId(f"{prefix}-{self.new_uuid()}")
