"""A fleet whose token Secret is missing, then lacks its key, on the real kubelet.

The operator never reads the Secret (it may not be granted Secrets in the fleet's namespace): it recognises what
keeps the pods from starting in the kubelet's own words, the message of a container waiting with
CreateContainerConfigError (``planners.fleet_status.token_secret_blocked``). tests/kube/test_papercuts.py checks the
condition against the fake kubelet, whose messages are written to look like the kubelet's; here the kubelet writes
them: the message each pod shows is asserted as the kubelet wrote it, and the operator's Ready=False
TokenSecretMissing names the Secret (and the key) from it. Once the Secret holds the key, the pods start.
"""

from __future__ import annotations

from typing import Any

import pytest
from support.kube import wait_until
from support.node_stage import FleetStage

pytestmark = [pytest.mark.soak, pytest.mark.node, pytest.mark.timeout(900)]  # the kubelet's retries: make soak

SECRET = "late-token"


def waiting_message(stage: FleetStage) -> str:
    """What the kubelet says of fleet pod 0's container while it cannot configure it ('' while it says nothing)."""
    pod = stage.kube.get("pod", f"{stage.name}-0", namespace=stage.namespace) or {}
    for container in (pod.get("status") or {}).get("containerStatuses") or ():
        waiting = (container.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") == "CreateContainerConfigError":
            return str(waiting.get("message") or "")
    return ""


def blocked(stage: FleetStage, words: str) -> dict[str, Any] | None:
    ready = stage.condition("Ready")
    return ready if ready.get("reason") == "TokenSecretMissing" and words in ready.get("message", "") else None


def test_a_missing_token_secret_and_a_missing_key_are_named_from_the_kubelets_own_message(stage: FleetStage) -> None:
    stage.apply_example(1, coordinator={"tokenSecretRef": {"name": SECRET, "key": "token"}})

    said = wait_until(lambda: waiting_message(stage), "the kubelet's CreateContainerConfigError", timeout_s=240)
    assert said == f'secret "{SECRET}" not found'
    ready = wait_until(lambda: blocked(stage, "does not exist"), "Ready=False TokenSecretMissing", timeout_s=120)
    assert ready["status"] == "False" and f"Secret {stage.namespace}/{SECRET}" in ready["message"]
    assert any(SECRET in message for message in stage.messages("TokenSecretMissing"))

    stage.kubectl("create", "secret", "generic", SECRET, "--from-literal=not-the-token=x")
    said = wait_until(
        lambda: (m := waiting_message(stage)).startswith("couldn't find key") and m, "the missing key", timeout_s=240
    )
    assert said == f"couldn't find key token in Secret {stage.namespace}/{SECRET}"
    wait_until(lambda: blocked(stage, "has no key token"), "the key named", timeout_s=120)

    token = stage.kube.get("secret", "orders-token", namespace=stage.namespace)["data"]["token"]
    stage.kube.apply(
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": SECRET}, "data": {"token": token}},
        namespace=stage.namespace,
    )
    stage.ready_and_stable(1)
    assert stage.condition("Ready")["status"] == "True"
