"""One static member per running pod, played against Berth's coordinator, in one process:
``python -m benchmarks.pod_members < SPEC_JSON``.

SPEC: {"url", "token", "kubeconfig", "selector" (the pods' label selector), "stats" (a file path)}. For the scale
benchmark ``operator_pods``, where a member process per pod does not fit a 2-core machine, with the stage controller
(``tests/support/control_plane/stage_controller.py``) playing the kubelet:

- **one watch of the pods** (every namespace, ``selector``; plain JSON, not the client's models) drives the
  members: a pod Running and Ready starts the member of its UID, as its container would, with the pod's own
  ``BERTH_GROUP_ID``, session and rebalance timeouts and heartbeat interval (its instance id is its name, as the
  downward API gives it); a pod marked for deletion, or gone, silences its member at once (a static member sends no
  leave: its process just stops). A replacement pod of the same name (a new UID) starts a new member, which rejoins
  under the same instance id;
- each member does what the member library does on the wire (docs/api.md): a join with ``member_id: ""`` and its
  instance id, the leader's sync with an assignment for every member (``orders``' 12 partitions, round robin, in the
  member library's encoding), a heartbeat every interval, a rejoin when told; ``plan_after`` is that decision,
  pure and unit-tested;
- members share HTTP connections (``benchmarks.fastclient``): a request takes an idle connection or opens one, and
  a long-poll (join, sync) holds its connection until answered, so the connections in use are the requests in flight.

Every 2 s (and on SIGTERM, then it exits) it writes its counters to ``stats``: members started and silenced, members
in a generation (heartbeating), requests by kind and error, its own CPU-seconds, and the restart gaps: per pod
replaced, the seconds from its member silenced to its replacement's member started, how many were longer than the
session timeout (a rebalance: the old member expired before the new one joined), and how much of it passed before the
replacement pod was created (the StatefulSet controller's part; the rest is the stage controller's and the watch's).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum
from pathlib import Path
from typing import Any

from benchmarks.fastclient import Connection
from berth.coordinator.client.assignors import AssignorMember, RoundRobinAssignor
from berth.coordinator.client.encoding import Subscription, encode_assignment, encode_subscription
from berth.coordinator.protocol import Error

TOPIC = "orders"
PARTITIONS = 12
PROTOCOL_TYPE = "consumer"
PROTOCOL_NAME = RoundRobinAssignor.name
SUBSCRIPTION = base64.b64encode(encode_subscription(Subscription((TOPIC,), {}))).decode()
#: How long a member waits before asking again after an answer it cannot act on (a coordinator busy or loading).
RETRY_S = 1.0
IDLE_CONNECTIONS = 64


class Next(Enum):
    """What a member does after an answer."""

    SYNC = "sync"  # its join succeeded
    HEARTBEAT = "heartbeat"  # it is in the generation
    REJOIN = "rejoin"  # a rebalance: join again under its member id
    REJOIN_FRESH = "rejoin-fresh"  # its member id is unknown (expired, replaced): join again with ""
    STOP = "stop"  # fenced: another process holds its instance id
    RETRY = "retry"  # anything else: the same request again, after RETRY_S


def plan_after(kind: str, error_code: int) -> Next:
    """The member's next step after an answer to its ``kind`` (join, sync or heartbeat) with ``error_code``."""
    if error_code == Error.NONE:
        return Next.SYNC if kind == "join" else Next.HEARTBEAT
    if error_code == Error.FENCED_INSTANCE_ID:
        return Next.STOP
    if error_code == Error.UNKNOWN_MEMBER_ID:
        return Next.REJOIN_FRESH
    if error_code in (Error.REBALANCE_IN_PROGRESS, Error.ILLEGAL_GENERATION, Error.MEMBER_ID_REQUIRED):
        return Next.REJOIN
    return Next.RETRY


def assign(member_ids: Sequence[str], partitions: int = PARTITIONS) -> list[dict[str, str]]:
    """The leader's sync assignments: the member library's round-robin assignor over ``partitions`` of the topic."""
    subscription = Subscription((TOPIC,), {})
    members = [AssignorMember(member_id, None, subscription) for member_id in member_ids]
    assigned = RoundRobinAssignor().assign(members, {TOPIC: partitions})
    return [
        {"member_id": m, "assignment": base64.b64encode(encode_assignment(a)).decode()} for m, a in assigned.items()
    ]


@dataclass(frozen=True, slots=True)
class PodMember:
    """What a member reads of its pod."""

    namespace: str
    name: str
    uid: str
    group: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    heartbeat_interval_ms: int
    created_at: float = 0.0  # the pod's creationTimestamp (wall clock, whole seconds); 0 when absent

    @classmethod
    def of(cls, pod: dict[str, Any]) -> PodMember | None:
        """The member a Running and Ready pod (as the API server sends it) runs; None for a pod that runs none (yet,
        or any more)."""
        status, meta = pod.get("status") or {}, pod["metadata"]
        if meta.get("deletionTimestamp") or status.get("phase") != "Running":
            return None
        if not any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or []):
            return None
        for container in pod["spec"]["containers"]:
            env = {e["name"]: e["value"] for e in container.get("env") or [] if "value" in e}
            if "BERTH_GROUP_ID" in env:
                session = int(env.get("BERTH_SESSION_TIMEOUT_MS", "45000"))
                return cls(
                    meta["namespace"],
                    meta["name"],
                    meta["uid"],
                    env["BERTH_GROUP_ID"],
                    session,
                    int(env.get("BERTH_REBALANCE_TIMEOUT_MS", str(session))),
                    int(env.get("BERTH_HEARTBEAT_INTERVAL_MS", str(session // 3))),
                    created_at(meta.get("creationTimestamp")),
                )
        return None


def created_at(stamp: str | None) -> float:
    """An RFC 3339 timestamp as the API server writes it (``2026-11-28T22:00:00Z``), in seconds since the epoch."""
    if not stamp:
        return 0.0
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()


class Pool:
    """Connections to the coordinator: a request takes an idle one or opens one, and gives it back when answered."""

    def __init__(self, url: str, token: str, counts: Counter[str]) -> None:
        self.url, self.token, self.counts = url, token, counts
        self.idle: list[Connection] = []
        self.open = 0

    async def call(self, kind: str, group: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST ``body`` to the group's ``kind`` route; the decoded answer (a dropped connection: sent again)."""
        path = f"/v1/groups/{group}/{kind}"
        while True:
            if self.idle:
                conn = self.idle.pop()
            else:
                conn = await Connection.open(self.url, self.token)
                self.open += 1
            try:
                answer = await conn.json("POST", path, body)
            except asyncio.CancelledError:  # the member was silenced mid-request: its connection drops with it
                await self._drop(conn)
                raise
            except (ConnectionError, OSError):
                await self._drop(conn)
                self.counts["reconnects"] += 1
                continue
            except RuntimeError as error:  # an HTTP error (503 TOO_MANY_CONNECTIONS...): counted, asked again
                await self._drop(conn)
                self.counts[f"{kind} HTTP {str(error).split('HTTP ', 1)[-1][:3]}"] += 1
                await asyncio.sleep(RETRY_S)
                continue
            if len(self.idle) < IDLE_CONNECTIONS:
                self.idle.append(conn)
            else:
                await self._drop(conn)
            self.counts[f"{kind} {answer.get('error', '?')}"] += 1
            return dict(answer)

    async def _drop(self, conn: Connection) -> None:
        self.open -= 1
        await conn.close()


class Members:
    """The running members, by pod (namespace, name), each the member of one pod UID."""

    def __init__(self, pool: Pool, counts: Counter[str]) -> None:
        self.pool, self.counts = pool, counts
        self.running: dict[tuple[str, str], tuple[str, asyncio.Task[None]]] = {}
        self.in_generation: set[tuple[str, str]] = set()
        self.silenced_at: dict[tuple[str, str], float] = {}  # wall clock, as creation timestamps are
        #: Per restarted pod: seconds from its member silenced (the old pod marked for deletion) to the member of
        #: the pod replacing it started (Running and Ready), the session timeout it had to come back within, and of
        #: the gap, the seconds until the replacement was created (the StatefulSet controller's part, after the
        #: deletion was confirmed; to a second, as creation timestamps are).
        self.gaps: list[tuple[float, int, float | None]] = []

    def pod_seen(self, pod: PodMember | None, key: tuple[str, str], uid: str) -> None:
        """A pod's latest state: start its member, or silence the member of a pod deleted or replaced."""
        current = self.running.get(key)
        gone = pod is None and current is not None and current[0] == uid  # a late event of an older pod: nothing
        replaced = pod is not None and current is not None and current[0] != pod.uid
        if gone or replaced:
            self.silence(key)
            current = None
        if pod is not None and current is None:
            if key in self.silenced_at:
                silenced = self.silenced_at.pop(key)
                created = pod.created_at - silenced if pod.created_at else None
                self.gaps.append((time.time() - silenced, pod.session_timeout_ms, created))
            self.counts["members started"] += 1
            self.running[key] = (pod.uid, asyncio.get_running_loop().create_task(self._play(key, pod)))

    def silence(self, key: tuple[str, str]) -> None:
        _, task = self.running.pop(key)
        task.cancel()
        self.silenced_at[key] = time.time()
        self.in_generation.discard(key)
        self.counts["members silenced"] += 1

    async def _play(self, key: tuple[str, str], pod: PodMember) -> None:
        member_id, body = "", {"group_instance_id": pod.name}
        heartbeat_s = pod.heartbeat_interval_ms / 1000
        while True:
            joined = await self.pool.call(
                "join",
                pod.group,
                {
                    **body,
                    "member_id": member_id,
                    "session_timeout_ms": pod.session_timeout_ms,
                    "rebalance_timeout_ms": pod.rebalance_timeout_ms,
                    "protocol_type": PROTOCOL_TYPE,
                    "protocols": [{"name": PROTOCOL_NAME, "metadata": SUBSCRIPTION}],
                    "client_id": "pod-members",
                },
            )
            step = plan_after("join", joined["error_code"])
            member_id = joined.get("member_id") or member_id
            if step is Next.STOP:
                self.counts["members fenced"] += 1
                return
            if step is not Next.SYNC:
                member_id = "" if step is Next.REJOIN_FRESH else member_id
                if step is Next.RETRY:
                    await asyncio.sleep(RETRY_S)
                continue
            generation = joined["generation_id"]
            leader = joined["members"] and not joined.get("skip_assignment")
            synced = await self.pool.call(
                "sync",
                pod.group,
                {
                    **body,
                    "member_id": member_id,
                    "generation_id": generation,
                    "protocol_type": PROTOCOL_TYPE,
                    "protocol_name": joined.get("protocol_name") or PROTOCOL_NAME,
                    "assignments": assign([m["member_id"] for m in joined["members"]]) if leader else [],
                },
            )
            step = plan_after("sync", synced["error_code"])
            while step is Next.HEARTBEAT:
                self.in_generation.add(key)
                await asyncio.sleep(heartbeat_s)
                beat = {**body, "member_id": member_id, "generation_id": generation}
                step = plan_after("heartbeat", (await self.pool.call("heartbeat", pod.group, beat))["error_code"])
                while step is Next.RETRY:
                    await asyncio.sleep(RETRY_S)
                    step = plan_after("heartbeat", (await self.pool.call("heartbeat", pod.group, beat))["error_code"])
            self.in_generation.discard(key)
            if step is Next.STOP:
                self.counts["members fenced"] += 1
                return
            if step is Next.REJOIN_FRESH:
                member_id = ""
            elif step is Next.RETRY:
                await asyncio.sleep(RETRY_S)


def watch_pods(spec: dict[str, Any], loop: asyncio.AbstractEventLoop, members: Members, stop: threading.Event) -> None:
    """The one watch of the pods, in a thread: each event handed to ``members`` on the loop."""
    import kubernetes

    client = kubernetes.config.new_client_from_config(config_file=spec["kubeconfig"])
    core = kubernetes.client.CoreV1Api(client)
    version = ""
    while not stop.is_set():
        try:
            for event in kubernetes.watch.Watch().stream(
                core.list_pod_for_all_namespaces,
                label_selector=spec["selector"],
                resource_version=version,
                timeout_seconds=5,
                deserialize=False,  # plain JSON: a V1Pod per event costs more than the member it drives
            ):
                pod = event["object"]
                if event["type"] not in ("ADDED", "MODIFIED", "DELETED"):  # BOOKMARK
                    continue
                meta = pod["metadata"]
                version = meta["resourceVersion"]
                member = None if event["type"] == "DELETED" else PodMember.of(pod)
                loop.call_soon_threadsafe(members.pod_seen, member, (meta["namespace"], meta["name"]), meta["uid"])
        except kubernetes.client.ApiException as error:
            if error.status == 410:
                version = ""
        except Exception:  # an ERROR event (a 410: the client's raw mode fails on it), a read timeout: list again
            version = ""
            time.sleep(0.5)


def write_stats(path: Path, members: Members, counts: Counter[str]) -> None:
    gaps = sorted(gap for gap, _, _ in members.gaps)
    until_created = sorted(part for _, _, part in members.gaps if part is not None)
    stats = {
        "members_running": len(members.running),
        "restart_gaps_s": {
            "count": len(gaps),
            "median": gaps[len(gaps) // 2] if gaps else None,
            "p90": gaps[int(len(gaps) * 0.9)] if gaps else None,
            "max": gaps[-1] if gaps else None,
            "over_the_session_timeout": sum(1 for gap, session, _ in members.gaps if gap * 1000 > session),
            "until_the_replacement_was_created_median": until_created[len(until_created) // 2]
            if until_created
            else None,
            "until_the_replacement_was_created_p90": (
                until_created[int(len(until_created) * 0.9)] if until_created else None
            ),
        },
        "members_in_generation": len(members.in_generation),
        "connections_open": members.pool.open,
        "cpu_s": sum(os.times()[:2]),
        "counts": dict(counts),
    }
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(stats))
    tmp.replace(path)


async def run(spec: dict[str, Any]) -> None:
    counts: Counter[str] = Counter()
    members = Members(Pool(spec["url"], spec["token"], counts), counts)
    stats = Path(spec["stats"])
    stop = threading.Event()
    done = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, done.set)
    threading.Thread(target=watch_pods, args=(spec, loop, members, stop), daemon=True).start()
    while not done.is_set():
        write_stats(stats, members, counts)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done.wait(), 2.0)
    stop.set()
    write_stats(stats, members, counts)


if __name__ == "__main__":
    asyncio.run(run(json.loads(sys.stdin.read())))
