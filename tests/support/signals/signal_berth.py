"""The lab's pods' processes as members of a group on Berth's real coordinator, spoken to over its HTTP protocol.

Each process is a static member (``group.instance.id`` = its pod's name) that behaves as the member library does:
it joins (its subscription in the member library's encoding, docs/formats.md), syncs (the leader assigns the
topic's partitions with the range assignor, except when told to skip assignment, KIP-814), heartbeats every third
of its session timeout, rejoins when told a rebalance is on, and when its process stops it simply goes silent (a
static member sends no leave). The coordinator runs on a manual clock: :meth:`BerthMembers.step` is called between
the lab's clock moves, and :meth:`settle` waits until every request the coordinator has answered is read, so a
history replays the same way however busy the machine is.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from support.api import Api

from berth.coordinator.client import CoordinatorAdmin
from berth.coordinator.client.assignors import AssignorMember, RangeAssignor
from berth.coordinator.client.encoding import (
    EncodingError,
    Subscription,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from berth.operator.adapters.coordinator_adapter import ClientCoordinatorPort
from berth.operator.planners.restarts import NOTHING, GroupActivity
from berth.operator.spec.fleet import OperatorDefaults

TOPIC = "orders"


@dataclass
class BerthMember:
    instance_id: str
    session_ms: int
    rebalance_ms: int
    subscription: bytes
    member_id: str = ""
    generation: int = -1
    stable: bool = False
    next_heartbeat_ms: int = 0
    task: asyncio.Task[dict[str, Any]] | None = None
    kind: str = ""  # what ``task`` is: "join" or "sync"
    stopped: bool = False


@dataclass
class BerthMembers:
    api: Api
    group: str
    partitions: int = 6
    live: dict[str, BerthMember] = field(default_factory=dict)
    #: Processes stopped while a request was outstanding: their tasks are awaited (and ignored) by :meth:`settle`.
    orphans: list[asyncio.Task[dict[str, Any]]] = field(default_factory=list)
    #: A changed subscription for processes started from now on (a new version of the consumer), or None.
    next_topics: tuple[str, ...] | None = None

    def start(self, instance_id: str, env: Mapping[str, str]) -> None:
        self.stop(instance_id)
        topics = self.next_topics or (TOPIC,)
        subscription = encode_subscription(Subscription(topics=topics, owned_partitions={}))
        self.live[instance_id] = BerthMember(
            instance_id,
            int(env["BERTH_SESSION_TIMEOUT_MS"]),
            int(env["BERTH_REBALANCE_TIMEOUT_MS"]),
            subscription,
        )

    def stop(self, instance_id: str) -> None:
        member = self.live.pop(instance_id, None)
        if member is not None and member.task is not None:
            self.orphans.append(member.task)

    async def step(self, now_ms: int) -> None:
        """Each live member one step further: read what was answered, send what is due."""
        for member in list(self.live.values()):
            await self._step(member, now_ms)

    async def _step(self, member: BerthMember, now_ms: int) -> None:
        if member.task is not None:
            if not member.task.done():
                return
            answer, kind = member.task.result(), member.kind
            member.task = None
            if kind == "join":
                self._joined(member, answer)
            else:
                self._synced(member, answer, now_ms)
        if member.task is None and not member.stable:
            self._join(member)
            return
        if member.stable and now_ms >= member.next_heartbeat_ms:
            answer = await self.api.heartbeat(self.group, member.member_id, member.generation, member.instance_id)
            member.next_heartbeat_ms = now_ms + member.session_ms // 3
            error = answer["error"]
            if error == "REBALANCE_IN_PROGRESS" or error == "ILLEGAL_GENERATION":
                member.stable = False
                self._join(member)
            elif error != "NONE":
                member.stable, member.member_id = False, "" if error == "UNKNOWN_MEMBER_ID" else member.member_id
                self._join(member)

    def _join(self, member: BerthMember) -> None:
        member.kind = "join"
        member.task = asyncio.ensure_future(
            self.api.join(
                self.group,
                member.member_id,
                member.instance_id,
                session_timeout_ms=member.session_ms,
                rebalance_timeout_ms=member.rebalance_ms,
                protocols=[("range", member.subscription)],
            )
        )

    def _joined(self, member: BerthMember, answer: dict[str, Any]) -> None:
        error = answer["error"]
        if error != "NONE":
            if error == "UNKNOWN_MEMBER_ID":
                member.member_id = ""
            elif answer.get("member_id"):
                member.member_id = answer["member_id"]
            return  # joined again at the next step
        member.member_id, member.generation = answer["member_id"], answer["generation_id"]
        assignments: dict[str, bytes] | None = None
        if answer["leader"] == member.member_id and answer.get("members") and not answer.get("skip_assignment"):
            assignments = self._assign(answer["members"])
        member.kind = "sync"
        member.task = asyncio.ensure_future(
            self.api.sync(self.group, member.member_id, member.generation, member.instance_id, assignments)
        )

    def _synced(self, member: BerthMember, answer: dict[str, Any], now_ms: int) -> None:
        error = answer["error"]
        if error == "NONE":
            member.stable = True
            member.next_heartbeat_ms = now_ms + member.session_ms // 3
        elif error == "UNKNOWN_MEMBER_ID":
            member.member_id = ""

    def _assign(self, members: list[dict[str, Any]]) -> dict[str, bytes]:
        joined = []
        for entry in members:
            try:
                subscription = decode_subscription(base64.b64decode(entry["metadata"]))
            except EncodingError:
                subscription = Subscription(topics=(), owned_partitions={})
            joined.append(AssignorMember(entry["member_id"], entry.get("group_instance_id"), subscription))
        topics = {topic for m in joined for topic in m.subscription.topics}
        assigned = RangeAssignor().assign(joined, dict.fromkeys(sorted(topics), self.partitions))
        return {member_id: encode_assignment(assignment) for member_id, assignment in assigned.items()}

    async def commit(self, owned: Mapping[str, Sequence[str]], offset: int) -> None:
        """Each live member commits ``offset`` for the partitions it owns (``owned``: ``topic:N`` by instance id, as
        the group describes them), with its member id and generation, as a consumer does; every one accepted."""
        for instance_id, partitions in owned.items():
            member = self.live[instance_id]
            by_topic: dict[str, list[int]] = {}
            for name in partitions:
                topic, _, partition = name.rpartition(":")
                by_topic.setdefault(topic, []).append(int(partition))
            body = {
                "generation_id": member.generation,
                "member_id": member.member_id,
                "group_instance_id": instance_id,
                "topics": [
                    {"name": topic, "partitions": [{"partition_index": p, "committed_offset": offset} for p in ps]}
                    for topic, ps in by_topic.items()
                ],
            }
            status, answer = await self.api.post(self.api.group_path(self.group, "/offsets"), body)
            errors = {p["error"] for t in answer.get("topics", ()) for p in t["partitions"]}
            assert status == 200 and errors <= {"NONE"}, answer

    def outstanding(self) -> list[asyncio.Task[dict[str, Any]]]:
        return [m.task for m in self.live.values() if m.task is not None] + self.orphans

    async def settle(self) -> None:
        """Every outstanding request read that the coordinator has answered: those it still holds are exactly its
        parked requests (joins and syncs waiting for the rest of the group; the lab leaves no other parked)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10.0
        while True:
            self.orphans = [task for task in self.orphans if not task.done()]
            pending = [task for task in self.outstanding() if not task.done()]
            parked = await self.api.parked()
            if len(pending) == parked:
                return
            if loop.time() > deadline:
                raise AssertionError(f"{len(pending)} requests outstanding, {parked} parked at the coordinator")
            await asyncio.sleep(0.002)


class BerthRig:
    """Berth's coordinator (a real process on its manual clock) as the lab's coordinator: the operator's port over the
    member library's admin client, members over the HTTP protocol, the journal followed as the reconciler does."""

    def __init__(self, coordinator_url: str, session: aiohttp.ClientSession) -> None:
        self.api = Api(session, coordinator_url)
        self.port = ClientCoordinatorPort(CoordinatorAdmin(coordinator_url, session=session))
        self.defaults = OperatorDefaults(coordinator_url=coordinator_url)
        self.records = None
        self._now = 0
        self.cursor = 0

    async def start(self) -> BerthRig:
        self._now = await self.api.advance(0)
        while True:  # the journal's end: history is not replayed (the follower starts there too)
            cursor, _ = await self.port.journal_page(self.cursor, 10_000, 0)
            if cursor == self.cursor:
                return self
            self.cursor = cursor

    def now_ms(self) -> int:
        return self._now

    async def advance(self, ms: int) -> None:
        self._now = await self.api.advance(ms)

    def members(self, group: str) -> BerthMembers:
        return BerthMembers(self.api, group)

    def spec(self) -> dict[str, Any]:
        return {}

    async def activity(self, group: str) -> GroupActivity:
        """The journal's pages since the last look, for ``group`` (``FleetReconciler.poke_groups``' part)."""
        found = NOTHING
        while True:
            cursor, groups = await self.port.journal_page(self.cursor, 1_000, 0)
            if cursor == self.cursor:
                return found
            self.cursor = cursor
            found = found + groups.get(group, NOTHING)

    async def truth(self, record: Any) -> None:
        events = await self.api.whole_journal()
        record.truth = [event for event in events if event["group_id"] == record.group]

    async def teardown(self, members: BerthMembers) -> None:
        """Every process stopped and every session expired, so no request of this history stays parked."""
        for instance_id in list(members.live):
            members.stop(instance_id)
        for _ in range(4):
            await self.advance(30_000)
            await members.settle()
        await self.advance(0)
