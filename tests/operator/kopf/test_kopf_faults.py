"""Faults during a scale-down, with the real operator, real static members and a real coordinator (tracker issue 8).

Each scenario breaks something in the middle of a 5 -> 3 scale-down of fleet ``orders`` and proves the outcome is
still the one without the fault: the departing ids are recorded before the StatefulSet shrinks, and orders-3 and
orders-4 leave the group through exactly one batch leave, recorded in ``status.lastScaleDown``.

- the coordinator is killed after the shrink and before the departing pods are gone, and comes back later;
- the API server answers the operator's status writes with 409 Conflict, several times, at the writes that matter;
- the fleet is deleted while its departing pods are still terminating.

(Elsewhere: the operator restarted between the shrink and the leave, ``test_kopf_scaling``; a coordinator that is
unreachable when a fleet is created, ``test_kopf_refusals``.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import aiohttp
import kmock
import pytest
from kopf_apiserver import FLEETS, ApiServer
from kopf_controller import StatefulSetController
from kopf_harness import (
    ORDERS,
    OperatorFactory,
    accepted,
    assert_left_once,
    call_failed,
    condition,
    delete_fleet,
    events,
    fleet_status,
    group_members,
    journal,
    left_by_admin,
    messages,
    one_admin_leave,
    passes_after,
    patch_fleet_spec,
    requests_to,
    running_coordinator,
    running_fleet,
    scale_down_writes,
    shrink_and_hold,
    sizes_after_creation,
    statefulset,
    stored,
    until,
)
from support.api import Api
from support.coordinator import CoordinatorProcess
from support.net import free_port

from berth.operator.adapters.coordinators import ADMIN_RETRY_FOR_S
from berth.operator.adapters.kube.fleets import CONFLICT_ATTEMPTS
from berth.operator.planners.pass_timing import PassTiming


@pytest.fixture
def coordinator(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[CoordinatorProcess]:
    """The coordinator on a fixed port (this module's override of conftest's): started again on the same data
    directory after it was killed, it answers at the same URL, as behind a Kubernetes Service."""
    port = ("--port", str(free_port()))
    with running_coordinator(tmp_path / "coordinator", lambda: call_failed(request), *port) as process:
        yield process


def _unreachable(apiserver: ApiServer) -> dict[str, Any] | None:
    found = condition(apiserver, "orders", "CoordinatorReachable")
    return found if found is not None and found["status"] == "False" else None


async def test_coordinator_killed_mid_scale_down_is_reported_and_the_leave_lands_once_when_it_is_back(
    apiserver: ApiServer,
    controller: StatefulSetController,
    coordinator: CoordinatorProcess,
    api: Api,
    session: aiohttp.ClientSession,
    start_operator: OperatorFactory,
) -> None:
    """The coordinator dies (kill -9) after the StatefulSet shrank and before the departing pods are gone.

    The operator says so (CoordinatorReachable=False, Ready=Unknown, one Warning Event), and while it cannot ask the
    coordinator it records nothing as left, though the pods are gone and passes keep running: orders-3 and orders-4
    stay departing, no lastScaleDown. Once the coordinator is back at the same URL (its data directory kept the
    group), the leave lands and is recorded, exactly once: ONE admin leave in the journal removing both, answered
    NONE for both, one lastScaleDown write, one LeftGroup Event (``assert_left_once``). Strictly one leave, not "at
    most one in effect": while the coordinator is down every pass stops at the describe it plans from, so the leave
    is never attempted; the pass that sends it had the coordinator answer that describe just before, and passes are
    serialised, so no retried leave can race a successful one. A second leave would show as a second lastScaleDown
    answered UNKNOWN_MEMBER_ID and an "already gone" Event.
    """
    await start_operator("--coordinator-url", coordinator.url)
    await running_fleet(apiserver, controller, api, 5)
    await shrink_and_hold(apiserver, controller, api)

    coordinator.kill()
    unreachable = await until(lambda: _unreachable(apiserver) or {}, "CoordinatorReachable=False")
    assert str(unreachable["message"]).startswith(f"cannot reach the coordinator at {coordinator.url}")
    ready = condition(apiserver, "orders", "Ready")
    assert ready is not None and (ready["status"], ready["reason"]) == ("Unknown", "CoordinatorUnreachable")
    await until(lambda: events(apiserver, "orders", "CoordinatorUnreachable"), "the Warning Event")
    warning = events(apiserver, "orders", "CoordinatorUnreachable")[0]
    assert warning["type"] == "Warning"
    assert "nothing was recorded as done, retrying with backoff" in warning["message"]

    # The departing pods go while the coordinator is down; passes that see them gone still cannot leave.
    controller.release()
    await until(lambda: sorted(controller.pods("orders")) == [0, 1, 2], "the departing pods gone")
    # Each of these passes retries the coordinator for ADMIN_RETRY_FOR_S before it reports it unreachable, and the
    # next waits out its backoff (nothing the pass reads changes meanwhile, so nothing asks for one sooner).
    await passes_after("orders", passes=2, timeout_s=2 * (ADMIN_RETRY_FOR_S + PassTiming().backoff_cap_s))
    status = fleet_status(apiserver, "orders")
    assert status["departing"] == ["orders-3", "orders-4"]
    assert "lastScaleDown" not in status
    assert scale_down_writes(apiserver) == []
    assert messages(apiserver, "orders", "LeftGroup") == []
    assert _unreachable(apiserver) is not None
    assert len(events(apiserver, "orders", "CoordinatorUnreachable")) == 1  # on the transition, not every pass

    coordinator.start()  # same data directory, same port
    await assert_left_once(apiserver, session, coordinator.url)
    assert await group_members(api) == {"orders-0", "orders-1", "orders-2"}
    await until(
        lambda: (c := condition(apiserver, "orders", "CoordinatorReachable")) and c["status"] == "True",
        "CoordinatorReachable=True",
    )
    await until(lambda: messages(apiserver, "orders", "CoordinatorReachable"), "the recovery Event")
    assert messages(apiserver, "orders", "CoordinatorReachable") == [
        f"the coordinator at {coordinator.url} answers again"
    ]
    assert sizes_after_creation(controller, "orders") == [5, 3]


def _status_write(fleet: str, key: str, value: object = ...) -> Callable[[kmock.Request], bool]:
    """Matches a status PATCH of ``fleet`` that sets ``key`` (to ``value``, when given)."""

    def matches(request: kmock.Request) -> bool:
        if request.method.value.upper() != "PATCH" or request.subresource != "status" or request.name != fleet:
            return False
        status = (request.data or {}).get("status") or {}
        return key in status and (value is ... or status[key] == value)

    return matches


def _writes_setting(apiserver: ApiServer, key: str, value: Sequence[str]) -> list[tuple[int, Any]]:
    writes = requests_to(apiserver, "PATCH", "/consumerfleets/orders/status")
    return [(at, body) for at, body in writes if body["status"].get(key) == list(value)]


async def test_status_write_conflicts_mid_scale_down_are_retried_and_change_nothing_in_the_outcome(
    apiserver: ApiServer,
    controller: StatefulSetController,
    coordinator: CoordinatorProcess,
    api: Api,
    session: aiohttp.ClientSession,
    start_operator: OperatorFactory,
) -> None:
    """The API server answers 409 Conflict (and stores nothing) to the three status writes a scale-down relies on:

    - the record of the departing ids, more times than one pass re-sends a write: that pass gives up (a Warning
      Event) and shrinks nothing; a later pass records them, and only then does the StatefulSet shrink;
    - the record of the narrowed expected members, twice;
    - the record of the batch leave (lastScaleDown), twice: the operator sends that same record again rather than
      the leave (a pass that stopped here would leave again: answered UNKNOWN_MEMBER_ID, the record of the real
      leave lost).

    The outcome is the one without conflicts: departing recorded before the shrink, exactly one leave (ONE admin
    leave in the journal, every attempted lastScaleDown write carrying the same record answered NONE, one
    LeftGroup Event), lastScaleDown written, the coordinator's expected members and status agreeing.
    """
    await start_operator("--coordinator-url", coordinator.url)
    await running_fleet(apiserver, controller, api, 5)

    departing = apiserver.refuse(
        _status_write("orders", "departing", ["orders-3", "orders-4"]), times=CONFLICT_ATTEMPTS + 1
    )
    narrowed = apiserver.refuse(_status_write("orders", "expectedMembers", ORDERS[:3]), times=2)
    recorded = apiserver.refuse(_status_write("orders", "lastScaleDown"), times=2)
    await patch_fleet_spec(apiserver, "orders", {"replicas": 3})

    await assert_left_once(apiserver, session, coordinator.url)
    # Every refusal was spent: each of the three writes was answered 409 as many times as planned.
    assert (departing.remaining, narrowed.remaining, recorded.remaining) == (0, 0, 0)
    departing_writes = _writes_setting(apiserver, "departing", ["orders-3", "orders-4"])
    shrinks = [
        at
        for at, body in requests_to(apiserver, "PATCH", "/statefulsets/orders")
        if isinstance(body, dict) and (body.get("spec") or {}).get("replicas") == 3
    ]
    assert len(shrinks) == 1
    assert accepted(apiserver, departing_writes)[0][0] < shrinks[0]
    assert all(at < shrinks[0] for at in departing.refused)
    # The recorded list was forgotten before the shrink (with the departing ids); the narrowed list is recorded
    # after it, with a later write of that pass or the next (the coordinator had it before the shrink).
    assert (accepted(apiserver, departing_writes)[0][1]["status"] or {}).get("expectedMembers", ...) is None
    assert accepted(apiserver, _writes_setting(apiserver, "expectedMembers", ORDERS[:3]))
    # The pass that ran out of re-sends said why it stopped.
    conflicts = await until(
        lambda: [m for m in messages(apiserver, "orders", "KubernetesApiError") if "HTTP 409" in m],
        "the KubernetesApiError Event",
    )
    assert {e["type"] for e in events(apiserver, "orders", "KubernetesApiError")} == {"Warning"}
    assert "the object has been modified" in conflicts[0]

    assert await group_members(api) == {"orders-0", "orders-1", "orders-2"}
    async with session.get(f"{coordinator.url}/v1/groups/orders/expected-members") as response:
        assert (await response.json())["group_instance_ids"] == ORDERS[:3]
    assert fleet_status(apiserver, "orders")["expectedMembers"] == ORDERS[:3]
    assert sizes_after_creation(controller, "orders") == [5, 3]


async def test_fleet_deleted_mid_scale_down_leaves_everyone_once_deletes_the_group_and_is_released(
    apiserver: ApiServer,
    controller: StatefulSetController,
    coordinator: CoordinatorProcess,
    api: Api,
    session: aiohttp.ClientSession,
    start_operator: OperatorFactory,
) -> None:
    """The fleet is deleted while orders-3 and orders-4 are departing and their pods still terminate.

    The finalizer takes the departing ids over and adds the rest (all five depart), scales to zero and waits: no
    one leaves while their pods exist, so the interrupted scale-down's leave never goes out on its own. Once the
    pods are gone, ONE batch leave removes all five, each exactly once (orders-3 and orders-4 included, no second
    leave for them), the group is deleted on the coordinator, and Kopf releases the object.
    """
    await start_operator("--coordinator-url", coordinator.url)
    await running_fleet(apiserver, controller, api, 5)
    await shrink_and_hold(apiserver, controller, api)

    await delete_fleet(apiserver, "orders")
    await until(lambda: fleet_status(apiserver, "orders").get("departing") == ORDERS, "all five departing")
    await until(lambda: (s := statefulset(apiserver, "orders")) and s["spec"]["replicas"] == 0, "scaled to zero")
    everyone = ", ".join(ORDERS)
    waiting_for_pods = f"waiting for pods {everyone} to terminate before they leave the group"
    await until(lambda: waiting_for_pods in messages(apiserver, "orders", "Waiting"), "the finalizer waiting")
    assert await group_members(api) == set(ORDERS)
    assert scale_down_writes(apiserver) == []
    assert stored(apiserver, FLEETS, "orders") is not None

    controller.release()
    await until(lambda: stored(apiserver, FLEETS, "orders") is None, "the fleet released", timeout_s=60)

    assert controller.pods("orders") == {}
    journal_events = await journal(session, coordinator.url, "orders")
    assert left_by_admin(journal_events) == ORDERS
    assert one_admin_leave(journal_events, ORDERS)
    assert journal_events[-1]["type"] == "group_deleted"
    assert (await api.describe("orders"))["group_state"] == "Dead"
    [(_, write)] = scale_down_writes(apiserver)
    last = write["status"]["lastScaleDown"]
    assert last["removed"] == ORDERS
    assert last["results"] == dict.fromkeys(ORDERS, "NONE")
    await until(lambda: messages(apiserver, "orders", "Finalized"), "the Finalized Event")
    assert messages(apiserver, "orders", "LeftGroup") == [f"left the group: {everyone} (the group is now empty)"]
    assert messages(apiserver, "orders", "GroupDeleted") == ["deleted group orders"]
    assert sizes_after_creation(controller, "orders") == [5, 3, 0]
