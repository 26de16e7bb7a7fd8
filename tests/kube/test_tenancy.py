"""Hostile tenants on a shared cluster, against the real operator: a fleet author controls a spec, never the
operator's credentials or another team's group.

Team A runs fleet ``orders`` in its namespace (``stage``); team B, a namespace editor elsewhere, writes fleets meant
to steal the admin token (a coordinator URL pointing at its own listener), to reach internal services through the
operator (a URL with a path and query), or to take over A's group (an alias of the trusted coordinator's URL, the same
groupId, ``replicas: 0``).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest
from support.fleet_stage import Stage, admin_leaves, fleet_body
from support.kube import wait_until

pytestmark = [pytest.mark.kube, pytest.mark.slow]


class Listener:
    """A TCP listener on loopback that records every connection and the first bytes sent on it."""

    def __init__(self) -> None:
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.socket.getsockname()[1])
        self.received: list[bytes] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.socket.accept()
            except OSError:
                return
            with connection:
                connection.settimeout(2)
                try:
                    self.received.append(connection.recv(65536))
                except OSError:
                    self.received.append(b"")

    def close(self) -> None:
        self.socket.close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    found = Listener()
    yield found
    found.close()


@pytest.fixture
def team_b(stage: Stage) -> str:
    return stage.kube.create_namespace(f"{stage.namespace[:40]}-b")


def refusal(stage: Stage, namespace: str, name: str) -> dict[str, str]:
    def condition() -> dict[str, str] | None:
        status = (stage.kube.get("cf", name, namespace=namespace) or {}).get("status") or {}
        ready = next((c for c in status.get("conditions") or [] if c["type"] == "Ready"), None)
        return ready if ready and ready.get("reason") else None

    return wait_until(condition, f"{namespace}/{name} refused")


def warnings(stage: Stage, namespace: str, name: str) -> list[dict[str, str]]:
    events = stage.kube.events(namespace, kind="ConsumerFleet", name=name)
    return [event for event in events if event["type"] == "Warning"]


def test_a_fleet_naming_its_own_listener_is_refused_and_the_listener_receives_nothing(
    stage: Stage, team_b: str, listener: Listener
) -> None:
    hostile = fleet_body("thief", 1, "thief")
    hostile["spec"]["coordinator"]["url"] = f"http://127.0.0.1:{listener.port}"
    stage.kube.apply(hostile, namespace=team_b)
    ready = refusal(stage, team_b, "thief")
    assert (ready["status"], ready["reason"]) == ("False", "UntrustedEndpoint")
    assert f"coordinator http://127.0.0.1:{listener.port} is not one the operator trusts" in ready["message"]
    wait_until(lambda: warnings(stage, team_b, "thief"), "the Warning Event")
    # A few more passes (the reconcile interval is 2 s) and a deletion: still nothing reaches the listener.
    stage.kube.kubectl("delete", "cf", "thief", "-n", team_b, "--wait=true", "--timeout=60s")
    assert listener.received == []
    assert stage.kube.get("statefulset", "thief", namespace=team_b) is None


@pytest.mark.parametrize("suffix", ["/internal/secret?token=x", "/.", "?a=1", "#x"])
def test_a_url_with_a_path_or_query_is_refused_at_admission(stage: Stage, team_b: str, suffix: str) -> None:
    """The API server refuses it (the operator refuses it too, for objects older than the CRD: test_endpoints)."""
    hostile = fleet_body("forger", 1, "forger")
    hostile["spec"]["coordinator"]["url"] = f"http://berth-coordinator.berth:9094{suffix}"
    refused = stage.kube.try_apply(hostile, namespace=team_b)
    assert refused.returncode != 0 and "spec.coordinator.url" in refused.stderr, refused.stderr
    hostile["spec"]["coordinator"]["url"] = "http://user@berth-coordinator.berth:9094"
    assert stage.kube.try_apply(hostile, namespace=team_b).returncode != 0


def test_an_alias_of_the_trusted_url_cannot_take_over_another_namespaces_group(stage: Stage, team_b: str) -> None:
    stage.apply(fleet_body("orders", 2, stage.group))
    before = stage.ready_and_stable(2)
    host, port = stage.coordinator.url.removeprefix("http://").split(":")
    for alias in (f"http://{host}.:{port}", f"http://{host}:0{port}/"):
        hostile = fleet_body("orders", 0, stage.group)
        hostile["spec"]["coordinator"]["url"] = alias
        stage.kube.apply(hostile, namespace=team_b)
        ready = refusal(stage, team_b, "orders")
        assert (ready["status"], ready["reason"]) == ("False", "GroupIdInUse"), ready
        assert f"already used by fleet {stage.namespace}/orders" in ready["message"]
    # Team B's fleet is deleted: A's group, its members and its generation are untouched.
    stage.kube.kubectl("delete", "cf", "orders", "-n", team_b, "--wait=true", "--timeout=60s")
    assert admin_leaves(stage.journal()) == []
    assert stage.members() == {"orders-0", "orders-1"}
    assert stage.describe()["generation_id"] == before["generation_id"]


def test_a_fleet_asking_for_more_replicas_than_the_operator_allows_is_refused_and_creates_nothing(
    stage: Stage, team_b: str
) -> None:
    """The CRD allows 10,000; this operator allows its default 1,000 (--max-replicas)."""
    greedy = fleet_body("greedy", 5_000, "greedy")
    stage.kube.apply(greedy, namespace=team_b)
    ready = refusal(stage, team_b, "greedy")
    assert (ready["status"], ready["reason"]) == ("False", "InvalidSpec")
    assert "spec.replicas: 5000 is above the operator's maximum of 1000 (--max-replicas)" in ready["message"]
    assert stage.kube.get("statefulset", "greedy", namespace=team_b) is None
