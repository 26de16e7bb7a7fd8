"""Recording clients and the loads they make, each a task that runs until the run says stop.

``Recorder`` puts every request into the run's ``History``: ``raw`` sends one request itself (aiohttp), ``attach``
wraps a member library's or an admin client's ``Transport`` so that every request the library sends (its retries
included) is recorded as it went. An answer is recorded when it is HTTP 200, or 409 GROUP_OWNED (a refusal that
shows the owner); anything else leaves the operation indeterminate.

The loads (``LOADS``), each on groups of its own so that the checker's models stay simple:

- ``committers``: two writers commit unique offsets to a simple group's partitions (no members), a reader fetches;
- ``expected``: two admin writers put and clear expected members (retrying COORDINATOR_NOT_AVAILABLE and timeouts
  with the same request, as the operator does), a reader gets them;
- ``owners``: two admins with owner uids claim and release a group, assert their uid on its expected members and
  its deletion, and describe it;
- both on groups without members, a new one every few seconds so that each key's history stays short (Jepsen's
  independent keys: an indeterminate operation may take effect at any time, and many on one key make the search
  explode);
- ``raw_static``: static members speaking the protocol directly (join, sync as leader or follower, heartbeat,
  commit), restarting now and then within their session timeout with a new member id, the old one kept alive a
  moment as a zombie that goes on heartbeating and committing;
- ``library_static``: the member library's static members, pre-registered, committing their partitions, restarted
  now and then (closed without leaving, started again with the same instance id);
- ``library_dynamic``: the member library's dynamic members that leave and are replaced.

Every offset any load commits is unique in the run (one counter), so a value read names the write it came from.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import aiohttp
import msgspec

from berth.coordinator.client import CoordinatorAdmin, GroupMember, MemberConfig
from berth.coordinator.client.errors import BerthClientError, GroupOwnedError
from berth.coordinator.client.transport import Transport
from berth.coordinator.protocol.codec import encode
from robustness.checker import Plan
from robustness.history import Body, History

REQUEST_TIMEOUT_S = 3.0
SESSION_TIMEOUT_MS = 30_000
#: Long-polls (join, sync) wait longer than a request: a rebalance waits for its members.
LONG_POLL_S = 20.0


def _what(method: str, path: str) -> tuple[str, str]:
    """(group, what) of a path ``/v1/groups/<group>[/<what>]``."""
    parts = path.split("?", 1)[0].split("/")
    group = parts[3] if len(parts) > 3 else ""
    tail = parts[4] if len(parts) > 4 else ""
    from urllib.parse import unquote

    group = unquote(group)
    if tail == "offsets":
        return group, "commit" if method == "POST" else "fetch"
    if tail == "expected-members":
        return group, "expected"
    if tail:
        return group, tail
    return group, "delete" if method == "DELETE" else "describe"


class Recorder:
    def __init__(self, history: History) -> None:
        self.history = history

    async def raw(
        self,
        session: aiohttp.ClientSession,
        base: str,
        process: str,
        method: str,
        path: str,
        body: Body | None = None,
        headers: dict[str, str] | None = None,
        timeout_s: float = REQUEST_TIMEOUT_S,
    ) -> Body | None:
        """Send one request and record it; the answer (HTTP 200, or a 409 GROUP_OWNED body), or None."""
        group, what = _what(method, path)
        op = self.history.invoke(process, method, path, group, what, dict(body or {}), dict(headers or {}))
        status, answer = 0, None
        try:
            async with session.request(
                method, base + path, json=body, headers=headers, timeout=aiohttp.ClientTimeout(total=timeout_s)
            ) as response:
                status = response.status
                if status in (200, 409):
                    answer = await response.json()
                    if status == 409 and answer.get("error") != "GROUP_OWNED":
                        answer = None
        except (TimeoutError, aiohttp.ClientError, OSError, ValueError):
            answer = None
        self.history.complete(op, status, answer)
        return answer

    def attach(self, transport: Transport, process: str) -> None:
        """Record every request ``transport`` sends (the member library's, an admin client's)."""
        send = transport.request
        history = self.history

        async def request(method: str, path: str, answer: type[Any], **kwargs: Any) -> Any:
            group, what = _what(method, path)
            body = kwargs.get("body")
            sent = {} if body is None else json.loads(encode(body))
            params = kwargs.get("params") or ()
            if params:
                sent["params"] = list(params)
            op = history.invoke(process, method, path, group, what, sent, dict(kwargs.get("headers") or {}))
            try:
                result = await send(method, path, answer, **kwargs)
            except GroupOwnedError as exc:
                owner = None if exc.owner is None else msgspec.to_builtins(exc.owner)
                history.complete(op, 409, {"error": "GROUP_OWNED", "owner": owner})
                raise
            except BaseException:
                history.complete(op, 0, None)
                raise
            history.complete(op, 200, json.loads(encode(result)))
            return result

        transport.request = request  # type: ignore[method-assign]


@dataclass
class Context:
    url: str
    recorder: Recorder
    rng: random.Random
    stop: asyncio.Event
    plan: Plan
    offsets: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    notes: list[str] = field(default_factory=list)

    async def pause(self, low: float, high: float) -> bool:
        """Sleep a random while; True once the run says stop."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.stop.wait(), self.rng.uniform(low, high))
        return self.stop.is_set()


def group_path(group: str, suffix: str = "") -> str:
    return f"/v1/groups/{quote(group, safe='')}{suffix}"


def commit_body(
    offsets: dict[tuple[str, int], int], member: str = "", generation: int = -1, instance: str | None = None
) -> Body:
    topics: dict[str, list[Body]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        topics.setdefault(topic, []).append({"partition_index": partition, "committed_offset": offset})
    body: Body = {
        "member_id": member,
        "generation_id": generation,
        "topics": [{"name": t, "partitions": p} for t, p in topics.items()],
    }
    if instance is not None:
        body["group_instance_id"] = instance
    return body


# ------------------------------------------------------------------------------------------ committers


async def committers(ctx: Context, session: aiohttp.ClientSession, name: str = "off-0", partitions: int = 3) -> None:
    keys = {("t", p) for p in range(partitions)}
    ctx.plan.offset_keys[name] = keys

    async def writer(process: str) -> None:
        while not await ctx.pause(0.02, 0.15):
            partition = ctx.rng.randrange(partitions)
            body = commit_body({("t", partition): next(ctx.offsets)})
            await ctx.recorder.raw(session, ctx.url, process, "POST", group_path(name, "/offsets"), body)

    async def reader(process: str) -> None:
        while not await ctx.pause(0.05, 0.2):
            await ctx.recorder.raw(session, ctx.url, process, "GET", group_path(name, "/offsets?topic=t"))

    await asyncio.gather(writer(f"{name}-w0"), writer(f"{name}-w1"), reader(f"{name}-r"))


# ------------------------------------------------------------------------------------- expected members


async def expected(ctx: Context, session: aiohttp.ClientSession, prefix: str = "exp") -> None:
    """Three writers PUT (or clear) expected members, a reader GETs them; a new group every few seconds, so that each
    register's history stays short enough to search (Jepsen's independent keys)."""
    for n in itertools.count():
        name = f"{prefix}-{n}"
        ctx.plan.registers.add(name)
        until = asyncio.get_running_loop().time() + ctx.rng.uniform(3.0, 5.0)

        async def writer(process: str, group: str = name, until: float = until) -> None:
            while asyncio.get_running_loop().time() < until and not await ctx.pause(0.05, 0.25):
                ids = [] if ctx.rng.random() < 0.2 else [f"{process}-{next(ctx.offsets)}"]
                await _retrying(
                    ctx, session, process, "PUT", group_path(group, "/expected-members"), {"group_instance_ids": ids}
                )

        async def reader(group: str = name, until: float = until) -> None:
            while asyncio.get_running_loop().time() < until and not await ctx.pause(0.01, 0.05):
                await ctx.recorder.raw(session, ctx.url, f"{prefix}-r", "GET", group_path(group, "/expected-members"))

        await asyncio.gather(writer(f"{prefix}-w0"), writer(f"{prefix}-w1"), writer(f"{prefix}-w2"), reader())
        if ctx.stop.is_set():
            return


async def _retrying(
    ctx: Context,
    session: aiohttp.ClientSession,
    process: str,
    method: str,
    path: str,
    body: Body | None = None,
    headers: dict[str, str] | None = None,
) -> None:
    """An operator's habit: the same request again while it may not have happened (a few times)."""
    for _ in range(3):
        answer = await ctx.recorder.raw(session, ctx.url, process, method, path, body, headers)
        if answer is not None and answer.get("error_code") not in (14, 15, 16):
            return
        if await ctx.pause(0.05, 0.2):
            return


# ------------------------------------------------------------------------------------------------ owners


async def owners(ctx: Context, session: aiohttp.ClientSession, prefix: str = "own") -> None:
    """Two admins with owner uids claim and release a group, assert their uid on expected-members writes and on
    the group's deletion, and describe it; a new group every few seconds (independent keys)."""
    for n in itertools.count():
        name = f"{prefix}-{n}"
        ctx.plan.admin_groups.add(name)
        until = asyncio.get_running_loop().time() + ctx.rng.uniform(3.0, 5.0)

        async def admin(uid: str, group: str = name, until: float = until) -> None:
            process = f"{prefix}-{uid}"
            owned = {"Berth-Owner-Uid": uid}
            while asyncio.get_running_loop().time() < until and not await ctx.pause(0.1, 0.4):
                choice = ctx.rng.random()
                if choice < 0.2:
                    ids = {"group_instance_ids": [f"{uid}-{next(ctx.offsets)}"]}
                    await _retrying(ctx, session, process, "PUT", group_path(group, "/expected-members"), ids, owned)
                elif choice < 0.45:
                    claim = {"namespace": "ns", "name": uid, "uid": uid}
                    await _retrying(ctx, session, process, "PUT", group_path(group, "/owner"), claim)
                elif choice < 0.65:
                    await _retrying(ctx, session, process, "DELETE", group_path(group, f"/owner?uid={uid}"))
                elif choice < 0.75:
                    await _retrying(ctx, session, process, "DELETE", group_path(group), None, owned)
                else:
                    await ctx.recorder.raw(session, ctx.url, process, "GET", group_path(group))

        await asyncio.gather(admin("u1"), admin("u2"))
        if ctx.stop.is_set():
            return


# -------------------------------------------------------------------------------------------- raw static


def encode_assignment(partitions: dict[str, list[int]]) -> str:
    raw = json.dumps({"version": 1, "partitions": partitions, "user_data": None}, separators=(",", ":"))
    return base64.b64encode(raw.encode()).decode()


def range_assignment(members: list[str], partitions: int) -> dict[str, list[int]]:
    ordered = sorted(members)
    return {m: [p for p in range(partitions) if p % len(ordered) == i] for i, m in enumerate(ordered)}


@dataclass
class RawMember:
    ctx: Context
    session: aiohttp.ClientSession
    group: str
    instance: str
    partitions: int
    member_id: str = ""
    generation: int = -1
    owned: list[int] = field(default_factory=list)

    async def call(
        self, what: str, body: Body, timeout_s: float = REQUEST_TIMEOUT_S, process: str | None = None
    ) -> Body | None:
        path = group_path(self.group, f"/{what}")
        return await self.ctx.recorder.raw(
            self.session, self.ctx.url, process or self.instance, "POST", path, body, timeout_s=timeout_s
        )

    async def join(self) -> bool:
        body = {
            "api_version": 9,
            "member_id": self.member_id,
            "group_instance_id": self.instance,
            "session_timeout_ms": SESSION_TIMEOUT_MS,
            "rebalance_timeout_ms": 10_000,
            "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": base64.b64encode(b"{}").decode()}],
        }
        answer = await self.call("join", body, LONG_POLL_S)
        if answer is None or answer["error_code"] != 0:
            if answer is not None and answer["error_code"] in (25, 82):  # UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID
                self.member_id = ""
            return False
        self.member_id, self.generation = answer["member_id"], answer["generation_id"]
        assignments = []
        if answer.get("leader") == self.member_id and answer.get("members") and not answer.get("skip_assignment"):
            plan = range_assignment([m["member_id"] for m in answer["members"]], self.partitions)
            assignments = [{"member_id": m, "assignment": encode_assignment({"t": ps})} for m, ps in plan.items()]
        sync = {
            "api_version": 5,
            "member_id": self.member_id,
            "generation_id": self.generation,
            "group_instance_id": self.instance,
            "protocol_type": "consumer",
            "protocol_name": "range",
            "assignments": assignments,
        }
        # As the member library does: the same sync again while the coordinator cannot answer it (a join instead would
        # be the leader's rejoin, which rebalances a Stable group: Kafka's rule for a leader that rejoins).
        give_up = asyncio.get_running_loop().time() + 25.0
        while True:
            synced = await self.call("sync", sync, LONG_POLL_S)
            if synced is not None and synced["error_code"] not in (14, 15, 16):
                break
            if await self.ctx.pause(0.1, 0.3) or asyncio.get_running_loop().time() > give_up:
                return False
        if synced is None or synced["error_code"] != 0:
            if synced is not None and synced["error_code"] in (25, 82):
                self.member_id = ""
            return False
        raw = base64.b64decode(synced.get("assignment") or "")
        self.owned = json.loads(raw)["partitions"].get("t", []) if raw else []
        return True

    async def beat(self, member: str | None = None, process: str | None = None) -> int | None:
        body = {
            "member_id": member or self.member_id,
            "generation_id": self.generation,
            "group_instance_id": self.instance,
        }
        answer = await self.call("heartbeat", body, process=process)
        return None if answer is None else int(answer["error_code"])

    async def commit(self, member: str | None = None, process: str | None = None) -> None:
        if not self.owned:
            return
        offsets = {("t", p): next(self.ctx.offsets) for p in self.owned}
        await self.call(
            "offsets", commit_body(offsets, member or self.member_id, self.generation, self.instance), process=process
        )

    async def zombie(self, old: str) -> None:
        """The old member id goes on for a moment after its instance restarted (a process not yet dead)."""
        for _ in range(3):
            await self.beat(old, process=f"{self.instance}-zombie")
            await self.commit(old, process=f"{self.instance}-zombie")
            if await self.ctx.pause(0.2, 0.6):
                return

    async def run(self) -> None:
        zombies: list[asyncio.Task[None]] = []
        while not self.ctx.stop.is_set():
            if not await self.join():
                if await self.ctx.pause(0.1, 0.4):
                    break
                continue
            while not await self.ctx.pause(0.3, 0.6):
                code = await self.beat()
                if code in (22, 25, 27, 82):  # ILLEGAL_GENERATION, UNKNOWN_MEMBER, REBALANCE_IN_PROGRESS, FENCED
                    if code in (25, 82):
                        self.member_id = ""
                    break
                await self.commit()
                if self.ctx.rng.random() < 0.04:  # a restart: a new process, a new member id, the same instance
                    zombies.append(asyncio.create_task(self.zombie(self.member_id)))
                    self.member_id = ""
                    break
        for task in zombies:
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def raw_static(ctx: Context, session: aiohttp.ClientSession, name: str = "raw-0", members: int = 2) -> None:
    partitions = 4
    ctx.plan.offset_keys[name] = {("t", p) for p in range(partitions)}
    ctx.plan.fixed_static.add(name)
    await _pre_register(ctx, session, name, [f"{name}-i{i}" for i in range(members)])
    raws = [RawMember(ctx, session, name, f"{name}-i{i}", partitions) for i in range(members)]
    await asyncio.gather(*(m.run() for m in raws), _offset_reader(ctx, session, name))


async def _pre_register(ctx: Context, session: aiohttp.ClientSession, group: str, instances: list[str]) -> None:
    for _ in range(100):
        answer = await ctx.recorder.raw(
            session,
            ctx.url,
            f"{group}-setup",
            "PUT",
            group_path(group, "/expected-members"),
            {"group_instance_ids": instances},
        )
        if answer is not None and answer["error_code"] == 0:
            return
        await asyncio.sleep(0.2)
    raise RuntimeError(f"could not pre-register {group}")


async def _offset_reader(ctx: Context, session: aiohttp.ClientSession, group: str) -> None:
    while not await ctx.pause(0.2, 0.5):
        await ctx.recorder.raw(session, ctx.url, f"{group}-reader", "GET", group_path(group, "/offsets?topic=t"))


# ---------------------------------------------------------------------------------------- member library


def _member(
    ctx: Context, group: str, instance: str | None, process: str, session: aiohttp.ClientSession
) -> GroupMember:
    config = MemberConfig(
        group_id=group,
        topics={"t": 6},
        coordinator_url=ctx.url,
        group_instance_id=instance,
        session_timeout_ms=SESSION_TIMEOUT_MS,
        rebalance_timeout_ms=10_000,
        heartbeat_interval_ms=500,
        request_timeout_ms=int(REQUEST_TIMEOUT_S * 1000),
        retry_backoff_max_ms=500,
    )
    member = GroupMember(config, session=session)
    ctx.recorder.attach(member._transport, process)
    return member


async def _commit_assigned(ctx: Context, member: GroupMember) -> None:
    mine = member.assignment.partitions.get("t", ())
    if mine and member.state.member_id:
        with contextlib.suppress(BerthClientError, asyncio.TimeoutError):
            await asyncio.wait_for(member.commit({("t", p): next(ctx.offsets) for p in mine}), 10)


async def library_static(ctx: Context, session: aiohttp.ClientSession, name: str = "lib-0", members: int = 3) -> None:
    ctx.plan.offset_keys[name] = {("t", p) for p in range(6)}
    ctx.plan.fixed_static.add(name)
    instances = [f"{name}-{i}" for i in range(members)]
    await _pre_register(ctx, session, name, instances)

    async def one(instance: str) -> None:
        restarts = 0
        while not ctx.stop.is_set():
            member = _member(ctx, name, instance, f"{instance}#{restarts}", session)
            await member.start()
            try:
                while not await ctx.pause(0.2, 0.5):
                    await _commit_assigned(ctx, member)
                    if ctx.rng.random() < 0.03:
                        break  # a restart: the process goes away (no leave: a static member's habit)
            finally:
                await member.close(leave=False)
            restarts += 1
            await ctx.pause(0.2, 1.5)  # back well within its session timeout

    await asyncio.gather(*(one(i) for i in instances), _offset_reader(ctx, session, name))


async def library_dynamic(ctx: Context, session: aiohttp.ClientSession, name: str = "dyn-0", members: int = 2) -> None:
    async def one(slot: int) -> None:
        generation = 0
        while not ctx.stop.is_set():
            member = _member(ctx, name, None, f"{name}-{slot}#{generation}", session)
            await member.start()
            try:
                await ctx.pause(2.0, 6.0)
            finally:
                await member.close()  # a dynamic member leaves
            generation += 1

    await asyncio.gather(*(one(s) for s in range(members)))


Load = Callable[[Context, aiohttp.ClientSession], Awaitable[None]]
LOADS: dict[str, Load] = {
    "committers": committers,
    "expected": expected,
    "owners": owners,
    "raw_static": raw_static,
    "library_static": library_static,
    "library_dynamic": library_dynamic,
}


async def admin_client(ctx: Context, process: str) -> CoordinatorAdmin:
    admin = CoordinatorAdmin(ctx.url, retry_for_s=60.0, request_timeout_s=REQUEST_TIMEOUT_S)
    ctx.recorder.attach(admin._transport, process)
    return admin
