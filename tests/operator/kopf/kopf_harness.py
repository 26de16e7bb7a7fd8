"""Running the real operator in-process against the emulator, and reading what it did.

``OperatorThread`` runs ``berth.operator.app.run_operator`` (what ``berth-operator`` runs) on its own event loop in
a thread: Kopf treats every task created after it starts as its own and cancels them when it stops, so it must not
share the test's loop, where kmock serves. It stops through Kopf's stop flag. The helpers below read Events,
status and the request log, and wait on observable state with bounded polling (never on elapsed time alone).
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import aiohttp
from kopf_apiserver import EVENTS, FLEETS, STATEFULSETS, ApiServer
from support.api import Api

from berth.operator.app import run_operator
from berth.operator.options import parse_options

NAMESPACE = "shop"
#: The coordinator's flags for these tests: forming a group should not wait out Kafka's 3 s initial delay.
COORDINATOR_FLAGS = ("--group-initial-rebalance-delay-ms", "100")
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
        self.thread.start()
        await until(lambda: self.ready_flag.is_set() or not self.thread.is_alive(), "the operator to start")
        assert self.thread.is_alive(), f"the operator exited at start: {self.error!r}"
        return self

    async def stop(self) -> None:
        self.stop_flag.set()
        await asyncio.to_thread(self.thread.join, 30)
        assert not self.thread.is_alive(), "the operator did not stop within 30 s"
        assert self.error is None, f"the operator failed: {self.error!r}"


OperatorFactory = Callable[..., Awaitable[OperatorThread]]


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
    """The Events posted about fleet ``fleet`` (optionally of one reason), oldest first."""
    found = []
    for (resource, namespace, _), stored_event in list(server.objects.items()):
        if resource != EVENTS or namespace != NAMESPACE or stored_event.deleted:
            continue
        event = stored_event.raw
        involved = event.get("involvedObject") or {}
        about_fleet = involved.get("kind") == "ConsumerFleet" and involved.get("name") == fleet
        if about_fleet and (reason is None or event.get("reason") == reason):
            found.append(dict(event))
    return sorted(found, key=lambda e: int(e["metadata"]["resourceVersion"]))


def messages(server: ApiServer, fleet: str, reason: str) -> list[str]:
    return [str(event.get("message")) for event in events(server, fleet, reason)]


def requests_to(server: ApiServer, method: str, path_suffix: str) -> list[tuple[int, Any]]:
    """(position in the request log, body) of every request with this method whose path ends so."""
    return [
        (position, request.data)
        for position, request in enumerate(server)
        if request.method.value.upper() == method and request.url.path.endswith(path_suffix)
    ]


async def passes_after(server: ApiServer, fleet: str, position: int, passes: int = 3) -> None:
    """Wait until the operator has started ``passes`` more reconcile passes on ``fleet`` after request ``position``
    of the log (each pass begins by reading the fleet), so a later duplicate action would have shown."""
    path = f"/consumerfleets/{fleet}"
    await until(
        lambda: len([at for at, _ in requests_to(server, "GET", path) if at > position]) >= passes,
        f"{passes} more passes over {fleet}",
    )


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
