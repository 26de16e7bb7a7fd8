"""Running the real operator in-process against the emulator, and reading what it did.

``OperatorThread`` runs ``berth.operator.command.app.run_operator`` (what ``berth-operator`` runs) on its own event
loop in a thread: Kopf treats every task created after it starts as its own and cancels them when it stops, so it
must not share the test's loop, where kmock serves. It stops through Kopf's stop flag. The helpers below read Events,
status and the request log, and wait on observable state with bounded polling (never on elapsed time alone); the
last section holds the steps of a 5 -> 3 scale-down of fleet ``orders`` that several modules share.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import urllib.request
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
from kopf_apiserver import EVENTS, FLEETS, STATEFULSETS, ApiServer
from kopf_controller import StatefulSetController
from support.api import Api
from support.coordinator import CoordinatorProcess
from support.kube import said

from berth.operator.command.app import run_operator
from berth.operator.command.options import parse_options

NAMESPACE = "shop"
#: The coordinator's flags for these tests: forming a group should not wait out Kafka's 3 s initial delay.
COORDINATOR_FLAGS = ("--group-initial-rebalance-delay-ms", "100")


@contextlib.contextmanager
def running_coordinator(data_dir: Path, failed: Callable[[], bool], *extra: str) -> Iterator[CoordinatorProcess]:
    """A real coordinator (system clock) for one test; its log is printed when ``failed()`` says the test failed."""
    process = CoordinatorProcess(data_dir, *COORDINATOR_FLAGS, *extra, manual_clock=False)
    process.start()
    try:
        yield process
    finally:
        if failed():
            print(process.stderr())
        if process.proc is not None and process.proc.poll() is None:
            process.kill()


def call_failed(request: Any) -> bool:
    """Whether a test's call phase failed (the ``rep_call`` hook in conftest records it)."""
    report = getattr(request.node, "rep_call", None)
    return report is not None and bool(report.failed)


T = TypeVar("T")


class OperatorThread:
    """One operator on its own event loop in a thread, stopped through Kopf's stop flag."""

    def __init__(self, argv: Sequence[str], environ: Mapping[str, str] | None = None) -> None:
        self.options = parse_options(list(argv), {**os.environ, **(environ or {})})
        self.stop_flag = threading.Event()
        self.ready_flag = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="berth-operator", daemon=True)

    def _run(self) -> None:
        try:
            asyncio.run(run_operator(self.options, stop_flag=self.stop_flag, ready_flag=self.ready_flag))
        except BaseException as error:  # reported by stop()
            self.error = error

    async def start(self) -> OperatorThread:
        RUNNING.append(self)
        self.thread.start()
        await until(lambda: self.ready_flag.is_set() or not self.thread.is_alive(), "the operator to start")
        assert self.thread.is_alive(), f"the operator exited at start: {self.error!r}"
        return self

    async def stop(self) -> None:
        if self in RUNNING:
            RUNNING.remove(self)
        self.stop_flag.set()
        await asyncio.to_thread(self.thread.join, 30)
        assert not self.thread.is_alive(), "the operator did not stop within 30 s"
        assert self.error is None, f"the operator failed: {self.error!r}"


OperatorFactory = Callable[..., Awaitable[OperatorThread]]
#: The operators started and not stopped (each with its metrics on a port of its own: ``passes_over``).
RUNNING: list[OperatorThread] = []


async def until(predicate: Callable[[], T], what: str, timeout_s: float = 30.0, poll_s: float = 0.02) -> T:
    """Poll ``predicate`` until it returns something truthy; fail naming ``what`` after ``timeout_s``."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"gave up after {timeout_s:.0f} s waiting for {what}")
        await asyncio.sleep(poll_s)


async def until_async(predicate: Callable[[], Awaitable[T]], what: str, timeout_s: float = 30.0) -> T:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        value = await predicate()
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"gave up after {timeout_s:.0f} s waiting for {what}")
        await asyncio.sleep(0.05)


# ------------------------------------------------------------------------------------------------- objects


def stored(server: ApiServer, resource: str, name: str, namespace: str = NAMESPACE) -> dict[str, Any] | None:
    try:
        found = server.objects[resource, namespace, name]
    except KeyError:  # (kmock's `in` compares keys unparsed: look the object up instead)
        return None
    return None if found.deleted else dict(found.raw)


def fleet_status(server: ApiServer, name: str) -> dict[str, Any]:
    return dict((stored(server, FLEETS, name) or {}).get("status") or {})


def condition(server: ApiServer, name: str, condition_type: str) -> dict[str, Any] | None:
    for entry in fleet_status(server, name).get("conditions") or []:
        if entry.get("type") == condition_type:
            return dict(entry)
    return None


def statefulset(server: ApiServer, name: str) -> dict[str, Any] | None:
    return stored(server, STATEFULSETS, name)


def events(server: ApiServer, fleet: str, reason: str | None = None) -> list[dict[str, Any]]:
    """What the Events posted about fleet ``fleet`` say (optionally of one reason), oldest first: one entry per thing
    said (``support.kube.said``: a pass's Events of one type are coalesced into one)."""
    found = []
    for (resource, namespace, _), stored_event in list(server.objects.items()):
        if resource != EVENTS or namespace != NAMESPACE or stored_event.deleted:
            continue
        event = stored_event.raw
        involved = event.get("involvedObject") or {}
        if involved.get("kind") == "ConsumerFleet" and involved.get("name") == fleet:
            found.append(dict(event))
    ordered = sorted(found, key=lambda e: int(e["metadata"]["resourceVersion"]))
    return [part for event in ordered for part in said(event) if reason is None or part["reason"] == reason]


def messages(server: ApiServer, fleet: str, reason: str) -> list[str]:
    return [str(event.get("message")) for event in events(server, fleet, reason)]


def requests_to(server: ApiServer, method: str, path_suffix: str) -> list[tuple[int, Any]]:
    """(position in the request log, body) of every request with this method whose path ends so (refused ones
    included: see :func:`accepted`)."""
    return [
        (position, request.data)
        for position, request in enumerate(server)
        if request.method.value.upper() == method and request.url.path.endswith(path_suffix)
    ]


def accepted(server: ApiServer, requests: list[tuple[int, Any]]) -> list[tuple[int, Any]]:
    """Those of ``requests`` (from :func:`requests_to`) that the API server carried out: not refused."""
    refused = server.refused()
    return [(position, body) for position, body in requests if position not in refused]


def sizes_after_creation(controller: StatefulSetController, name: str) -> list[int]:
    """The sizes the controller saw the StatefulSet at, after the 0 it is created at: a pass that creates it and
    scales it at once may scale it before the controller's next tick sees it at 0, and then it saw no 0."""
    seen = controller.sizes_seen.get(name, [])
    return seen[1:] if seen[:1] == [0] else seen


def passes_over(fleet: str) -> float:
    """How many passes the running operators have run over ``fleet``, whatever their outcome (their own counters,
    ``berth_operator_reconciles_total``: a pass reads the fleet from a cache, so the request log does not show it)."""
    total = 0.0
    for operator in RUNNING:
        url = f"http://127.0.0.1:{operator.options.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as answer:
            text = answer.read().decode()
        for line in text.splitlines():
            if line.startswith("berth_operator_reconciles_total{") and f'fleet="{fleet}"' in line:
                total += float(line.rsplit(" ", 1)[1])
    return total


async def passes_after(fleet: str, passes: int = 3, *, timeout_s: float = 30.0) -> None:
    """Wait until the operators have run ``passes`` more reconcile passes over ``fleet`` from now, so a later
    duplicate action would have shown."""
    start = await asyncio.to_thread(passes_over, fleet)
    deadline = asyncio.get_running_loop().time() + timeout_s
    while (done := await asyncio.to_thread(passes_over, fleet) - start) < passes:
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"gave up after {timeout_s:.0f} s waiting for {passes} more passes over {fleet}")
        await asyncio.sleep(0.1)
    assert done >= passes


# ---------------------------------------------------------------------------------------------- writing


async def create_fleet(server: ApiServer, body: dict[str, Any]) -> dict[str, Any]:
    path = f"/apis/berth.dev/v1alpha1/namespaces/{NAMESPACE}/consumerfleets"
    async with server.post(path, json=body) as response:
        assert response.status in (200, 201), await response.text()
        return dict(await response.json())


async def patch_fleet_spec(server: ApiServer, name: str, spec: Mapping[str, Any]) -> None:
    path = f"/apis/berth.dev/v1alpha1/namespaces/{NAMESPACE}/consumerfleets/{name}"
    headers = {"Content-Type": "application/merge-patch+json"}
    async with server.patch(path, json={"spec": dict(spec)}, headers=headers) as response:
        assert response.status == 200, await response.text()


async def set_paused(server: ApiServer, name: str, paused: bool) -> None:
    """``berth.dev/paused: "true"`` on the fleet, or removed."""
    path = f"/apis/berth.dev/v1alpha1/namespaces/{NAMESPACE}/consumerfleets/{name}"
    headers = {"Content-Type": "application/merge-patch+json"}
    patch = {"metadata": {"annotations": {"berth.dev/paused": "true" if paused else None}}}
    async with server.patch(path, json=patch, headers=headers) as response:
        assert response.status == 200, await response.text()


async def delete_fleet(server: ApiServer, name: str) -> None:
    path = f"/apis/berth.dev/v1alpha1/namespaces/{NAMESPACE}/consumerfleets/{name}"
    async with server.delete(path) as response:
        assert response.status == 200, await response.text()


def fleet_body(name: str, replicas: int, coordinator_url: str | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "berth.dev/v1alpha1",
        "kind": "ConsumerFleet",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "replicas": replicas,
            "template": {
                "metadata": {"labels": {"team": "shop"}},
                "spec": {
                    "terminationGracePeriodSeconds": 10,
                    "containers": [
                        {"name": "consumer", "image": "berth:0.1.0", "env": [{"name": "LOG_LEVEL", "value": "info"}]}
                    ],
                },
            },
            **spec,
        },
    }
    if coordinator_url is not None:
        body["spec"]["coordinator"] = {"url": coordinator_url}
    return body


async def journal(session: aiohttp.ClientSession, url: str, group: str) -> list[dict[str, Any]]:
    async with session.get(f"{url}/v1/journal", params={"limit": "10000"}) as response:
        body = await response.json()
    return [event for event in body["events"] if event.get("group_id") == group]


async def join_static_members(api: Api, group: str, instance_ids: Sequence[str]) -> dict[str, str]:
    """Real static members ``instance_ids`` join ``group`` together and sync; returns instance id -> member id.

    Their sessions (60 s) outlast any test, so they need no heartbeats.
    """
    joins: list[dict[str, Any]] = await asyncio.gather(
        *(
            api.join(group, "", instance_id=instance, session_timeout_ms=60_000, rebalance_timeout_ms=60_000)
            for instance in instance_ids
        )
    )
    for instance, joined in zip(instance_ids, joins, strict=True):
        assert joined["error"] == "NONE", (instance, joined)
    leader = next(j for j in joins if j["leader"] == j["member_id"])
    assignments = {member["member_id"]: b"" for member in leader["members"]}
    await asyncio.gather(
        *(
            api.sync(
                group,
                joined["member_id"],
                joined["generation_id"],
                instance_id=instance,
                assignments=assignments if joined is leader else None,
            )
            for instance, joined in zip(instance_ids, joins, strict=True)
        )
    )
    return {instance: joined["member_id"] for instance, joined in zip(instance_ids, joins, strict=True)}


# ------------------------------------------------------------- scaling fleet orders with real static members

#: Fleet ``orders``'s instance ids at five replicas.
ORDERS = [f"orders-{ordinal}" for ordinal in range(5)]


async def running_fleet(
    apiserver: ApiServer, controller: StatefulSetController, api: Api, replicas: int
) -> dict[str, str]:
    """Fleet ``orders`` at ``replicas`` pods, each with a real static member in the Stable group."""
    await create_fleet(apiserver, fleet_body("orders", replicas))
    await until(lambda: len(controller.pods("orders")) == replicas, f"{replicas} pods")
    members = await join_static_members(api, "orders", ORDERS[:replicas])
    await until(lambda: (c := condition(apiserver, "orders", "Ready")) and c["status"] == "True", "Ready=True")
    return members


async def group_members(api: Api, group: str = "orders") -> set[str]:
    described = await api.describe(group)
    return {member["group_instance_id"] for member in described["members"]}


def left_by_admin(events: list[dict[str, Any]]) -> list[str]:
    """Instance ids removed by an admin leave (by instance id), in journal order."""
    return [e["group_instance_id"] for e in events if e["type"] == "member_left" and e.get("via") == "admin"]


def one_admin_leave(events: list[dict[str, Any]], instance_ids: Sequence[str]) -> bool:
    """Whether ``instance_ids`` left through ONE admin leave: their ``member_left`` events are adjacent in the
    group's journal (a leave request removes its members in one step, and nothing of the group comes between)."""
    at = [i for i, e in enumerate(events) if e["type"] == "member_left" and e.get("group_instance_id") in instance_ids]
    if not at:
        return False
    removed = [events[i]["group_instance_id"] for i in at]
    return removed == list(instance_ids) and at == list(range(at[0], at[0] + len(at)))


async def shrink_and_hold(apiserver: ApiServer, controller: StatefulSetController, api: Api) -> None:
    """5 -> 3 with the departing pods held in Terminating: recorded, shrunk, and nobody has left yet."""
    controller.hold = True
    await patch_fleet_spec(apiserver, "orders", {"replicas": 3})
    await until(lambda: fleet_status(apiserver, "orders").get("departing") == ["orders-3", "orders-4"], "departing")
    await until(lambda: (s := statefulset(apiserver, "orders")) and s["spec"]["replicas"] == 3, "the shrink")
    await until(lambda: "deletionTimestamp" in controller.pods("orders")[4]["metadata"], "orders-4 terminating")
    await until(
        lambda: (c := condition(apiserver, "orders", "ScaleDownPending")) and c["status"] == "True", "ScaleDownPending"
    )
    # The pods still exist, so their members are still in the group: no leave yet.
    assert await group_members(api) == set(ORDERS)
    await until(lambda: any("to terminate" in m for m in messages(apiserver, "orders", "Waiting")), "the waiting Event")
    assert await group_members(api) == set(ORDERS)


def scale_down_writes(apiserver: ApiServer, fleet: str = "orders") -> list[tuple[int, Any]]:
    """(position, body) of every status write recording a batch leave (``lastScaleDown`` with who was removed; not
    the later write counting its rebalances), refused ones too."""
    writes = requests_to(apiserver, "PATCH", f"/consumerfleets/{fleet}/status")
    return [(at, body) for at, body in writes if "removed" in (body["status"].get("lastScaleDown") or {})]


async def assert_left_once(apiserver: ApiServer, session: aiohttp.ClientSession, coordinator_url: str) -> None:
    """orders-3 and orders-4 left through exactly one batch leave, answered NONE for both, recorded once.

    Exactly one leave: the coordinator's journal shows both removed by one admin leave and nobody else removed; the
    operator wrote one ``lastScaleDown`` (a status write the API server refused and the operator sent again carries
    the same record: every attempted write is compared), answered NONE for both (a second leave could only be
    answered UNKNOWN_MEMBER_ID), and posted one LeftGroup Event; a few more passes ran without another leave.
    """
    last = await until(lambda: fleet_status(apiserver, "orders").get("lastScaleDown"), "lastScaleDown")
    assert isinstance(last, dict), last
    assert accepted(apiserver, scale_down_writes(apiserver)), scale_down_writes(apiserver)
    # A second leave, if any, would come from a later pass: let a few run before counting.
    await passes_after("orders")
    assert last["removed"] == ["orders-3", "orders-4"], last
    assert last["results"] == {"orders-3": "NONE", "orders-4": "NONE"}, last
    assert fleet_status(apiserver, "orders")["departing"] == [], fleet_status(apiserver, "orders")
    # Events are posted in the background: wait for the first, then check it is the only one.
    await until(lambda: messages(apiserver, "orders", "LeftGroup"), "the LeftGroup Event")
    attempted = [body["status"]["lastScaleDown"] for _, body in scale_down_writes(apiserver)]
    assert len(accepted(apiserver, scale_down_writes(apiserver))) == 1, attempted
    # The rebalances are counted in a write of their own, once the group is Stable again.
    recorded_as = {key: value for key, value in last.items() if key != "rebalances"}
    # A write's nulls remove what an earlier scale-down said (a merge patch): they are not part of the record.
    written = [{k: v for k, v in a.items() if k != "rebalances" and v is not None} for a in attempted]
    assert written == [recorded_as] * len(attempted), (written, recorded_as)
    left = messages(apiserver, "orders", "LeftGroup")
    assert left == ["left the group: orders-3, orders-4"], left
    events = await journal(session, coordinator_url, "orders")
    assert left_by_admin(events) == ["orders-3", "orders-4"], events
    assert one_admin_leave(events, ["orders-3", "orders-4"]), events
    left_at = max(i for i, e in enumerate(events) if e["type"] == "member_left")
    rebalances = [e for e in events[left_at:] if e["type"] == "rebalance_started"]
    assert [e["cause"] for e in rebalances] == ["member_left"], events
