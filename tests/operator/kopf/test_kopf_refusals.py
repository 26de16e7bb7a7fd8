"""Fleets the operator refuses, and a coordinator it cannot reach: a status condition and a Warning Event, nothing
created (or recorded as done), and recovery once the cause is fixed."""

from __future__ import annotations

from pathlib import Path

from kopf_apiserver import SERVICES, ApiServer
from kopf_controller import StatefulSetController
from kopf_harness import (
    COORDINATOR_FLAGS,
    OperatorFactory,
    condition,
    create_fleet,
    delete_fleet,
    events,
    fleet_body,
    fleet_status,
    messages,
    patch_fleet_spec,
    statefulset,
    stored,
    until,
)
from support.coordinator import CoordinatorProcess
from support.net import free_port

from berth.operator.spec.names import GROUP


def _refused(apiserver: ApiServer, name: str, reason: str) -> dict[str, object] | None:
    valid = condition(apiserver, name, "SpecValid")
    return valid if valid and valid["status"] == "False" and valid["reason"] == reason else None


def _nothing_created(apiserver: ApiServer, name: str) -> bool:
    return statefulset(apiserver, name) is None and stored(apiserver, SERVICES, name) is None


async def test_invalid_specs_and_a_taken_group_id_are_refused_with_a_condition_and_a_warning(
    apiserver: ApiServer,
    controller: StatefulSetController,
    coordinator: CoordinatorProcess,
    start_operator: OperatorFactory,
) -> None:
    await start_operator("--coordinator-url", coordinator.url)
    await create_fleet(apiserver, fleet_body("orders", 1))
    await until(lambda: fleet_status(apiserver, "orders").get("selector"), "fleet orders established")

    await create_fleet(apiserver, fleet_body("orders-copy", 1, groupId="orders"))
    await create_fleet(apiserver, fleet_body("broken", 1, sessionTimeout={"policy": "Fixed"}))
    await create_fleet(apiserver, fleet_body("too-short", 1, sessionTimeout={"policy": "Fixed", "fixedMs": 1000}))

    taken = await until(lambda: _refused(apiserver, "orders-copy", "GroupIdInUse"), "orders-copy refused")
    assert f"group orders on {coordinator.url} is already used by fleet shop/orders" in str(taken["message"])
    broken = await until(lambda: _refused(apiserver, "broken", "InvalidSpec"), "broken refused")
    assert broken["message"] == "invalid spec: spec.sessionTimeout.fixedMs: is required when policy is Fixed"
    short = await until(lambda: _refused(apiserver, "too-short", "InvalidSessionTimeout"), "too-short refused")
    assert "spec.sessionTimeout.fixedMs: 1000 is below the coordinator's minimum session timeout 6000 ms" in str(
        short["message"]
    )
    for name, reason in (
        ("orders-copy", "GroupIdInUse"),
        ("broken", "InvalidSpec"),
        ("too-short", "InvalidSessionTimeout"),
    ):
        ready = condition(apiserver, name, "Ready")
        assert ready is not None and ready["status"] == "False" and ready["reason"] == reason
        await until(lambda n=name, r=reason: events(apiserver, n, r), f"the {reason} Event of {name}")
        assert {event["type"] for event in events(apiserver, name, reason)} == {"Warning"}
        assert _nothing_created(apiserver, name), name

    # Fixed: the refusal lifts and the fleet is created.
    await patch_fleet_spec(apiserver, "broken", {"sessionTimeout": {"policy": "Fixed", "fixedMs": 45000}})
    sts = await until(lambda: statefulset(apiserver, "broken"), "broken's StatefulSet")
    env = {e["name"]: e.get("value") for e in sts["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["BERTH_SESSION_TIMEOUT_MS"] == "45000"
    await until(lambda: (c := condition(apiserver, "broken", "SpecValid")) and c["status"] == "True", "SpecValid")
    assert fleet_status(apiserver, "broken")["sessionTimeoutReason"] == "fixed by spec.sessionTimeout.fixedMs: 45.0 s"
    await until(lambda: messages(apiserver, "broken", "Accepted"), "the Accepted Event")

    # The refused duplicate goes away at once: it never touched the group, so its finalizer has nothing to do.
    await delete_fleet(apiserver, "orders-copy")
    await until(lambda: stored(apiserver, f"{GROUP}/v1alpha1/consumerfleets", "orders-copy") is None, "released")
    assert statefulset(apiserver, "orders") is not None
    released = await until(lambda: messages(apiserver, "orders-copy", "Released"), "the Released Event")
    # Kopf runs a deletion handler at least once (a stale watch event can run it again before the finalizer's
    # removal is seen); the handler is idempotent, so the Event may repeat, but it says only this.
    assert set(released) == {"group orders belongs to fleet shop/orders: left it untouched"}


async def test_an_unreachable_coordinator_is_reported_and_retried_until_it_answers(
    apiserver: ApiServer,
    controller: StatefulSetController,
    start_operator: OperatorFactory,
    tmp_path: Path,
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    await start_operator("--coordinator-url", url)
    await create_fleet(apiserver, fleet_body("orders", 1))

    unreachable = await until(
        lambda: (c := condition(apiserver, "orders", "CoordinatorReachable")) and c["status"] == "False" and c,
        "CoordinatorReachable=False",
    )
    assert str(unreachable["message"]).startswith(f"cannot reach the coordinator at {url}")
    await until(lambda: events(apiserver, "orders", "CoordinatorUnreachable"), "the Warning Event")
    warning = events(apiserver, "orders", "CoordinatorUnreachable")[0]
    assert warning["type"] == "Warning"
    assert "nothing was recorded as done, retrying with backoff" in warning["message"]
    assert _nothing_created(apiserver, "orders")
    assert "expectedMembers" not in fleet_status(apiserver, "orders")

    late = CoordinatorProcess(tmp_path / "late", *COORDINATOR_FLAGS, "--port", str(port), manual_clock=False)
    late.start()
    try:
        await until(lambda: (s := statefulset(apiserver, "orders")) and s["spec"]["replicas"] == 1, "the retry")
        await until(
            lambda: (c := condition(apiserver, "orders", "CoordinatorReachable")) and c["status"] == "True",
            "CoordinatorReachable=True",
        )
        await until(lambda: messages(apiserver, "orders", "CoordinatorReachable"), "the recovery Event")
        assert messages(apiserver, "orders", "CoordinatorReachable") == [f"the coordinator at {url} answers again"]
        assert len(events(apiserver, "orders", "CoordinatorUnreachable")) == 1
        assert fleet_status(apiserver, "orders")["expectedMembers"] == ["orders-0"]
    finally:
        late.kill()
