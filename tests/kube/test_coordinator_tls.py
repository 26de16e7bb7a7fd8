"""TLS between the operator, the fleets' pods and Berth's coordinator (issue 12, item 15, operator side), on the real
API server: the operator verifies an https coordinator against ``--coordinator-ca-file`` and publishes that CA to
the fleet's pods in their template (an annotation, mounted through the downward API), which mount it and verify
with ``BERTH_CA_FILE``; against a CA the coordinator's certificate does not chain to, the fleet says TLS
verification failed and not a byte of HTTP (so no token) is sent. The operator runs as the ServiceAccount of a
chart release with ``coordinator.tls.enabled`` (which grants it no ConfigMaps: the API server would refuse any)."""

from __future__ import annotations

import json
import socket
import ssl
import threading
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.certs import Pair, make_ca, make_server_cert, openssl_or_skip
from support.coordinator import CoordinatorProcess
from support.fake_kubelet import FakeKubelet
from support.fleet_stage import ADMIN_TOKEN, fleet_body, write_tokens
from support.kube import Kube, wait_until
from support.kube_cluster import REPO
from support.operator_process import OperatorProcess

pytestmark = [pytest.mark.kube, pytest.mark.slow]

RELEASE = "tls"
CHART = REPO / "charts" / "berth"
COORDINATOR_FLAGS = ("--group-initial-rebalance-delay-ms", "100")


@dataclass
class TlsWorld:
    ca: Pair
    other_ca: Pair
    cert: Pair
    coordinator: CoordinatorProcess
    identity: Kube

    def get(self, path: str) -> Any:
        context = ssl.create_default_context(cafile=str(self.ca.cert))
        request = urllib.request.Request(
            self.coordinator.url + path, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
        )
        with urllib.request.urlopen(request, timeout=10, context=context) as answer:
            return json.loads(answer.read())


@pytest.fixture(scope="module")
def tls_world(kube: Kube, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsWorld]:
    openssl_or_skip()
    directory = tmp_path_factory.mktemp("tls")
    ca, other_ca = make_ca(directory / "ca"), make_ca(directory / "other", "someone-elses-ca")
    cert = make_server_cert(directory / "issued", ca, 1)
    tokens = write_tokens(directory / "tokens.yaml")
    coordinator = CoordinatorProcess(
        directory / "data",
        *COORDINATOR_FLAGS,
        *("--tokens-file", str(tokens), "--tls-cert-file", str(cert.cert), "--tls-key-file", str(cert.key)),
        manual_clock=False,
    )
    coordinator.start()
    assert coordinator.url.startswith("https://")
    kube.helm(
        "install", RELEASE, str(CHART), "-n", RELEASE, "--create-namespace",
        "--set", "coordinator.tls.enabled=true", "--set", "coordinator.tls.secretName=coordinator-cert",
    )  # fmt: skip
    try:
        yield TlsWorld(ca, other_ca, cert, coordinator, kube.as_service_account(RELEASE, f"{RELEASE}-operator"))
    finally:
        coordinator.kill()


def start_operator(world: TlsWorld, namespace: str, url: str, ca_file: Path, directory: Path) -> OperatorProcess:
    directory.mkdir(parents=True, exist_ok=True)
    token_file = directory / "admin-token"
    token_file.write_text(ADMIN_TOKEN)
    args = [
        "--namespace", namespace,
        "--coordinator-url", url,
        "--coordinator-ca-file", str(ca_file),
        "--token-file", str(token_file),
        "--liveness-port", "0",
        "--metrics-port", "0",
        "--reconcile-interval-s", "2",
    ]  # fmt: skip
    return OperatorProcess(world.identity.kubeconfig, directory / "operator.log", args).start()


def condition(kube: Kube, namespace: str, kind: str, name: str = "orders") -> dict[str, Any]:
    status = (kube.get("cf", name, namespace=namespace) or {}).get("status") or {}
    return next((dict(c) for c in status.get("conditions") or [] if c["type"] == kind), {})


def test_fleets_on_an_https_coordinator_get_the_ca_and_their_members_verify_with_it(
    kube: Kube, namespace: str, kubelet: FakeKubelet, tls_world: TlsWorld, tmp_path: Path
) -> None:
    operator = start_operator(tls_world, namespace, tls_world.coordinator.url, tls_world.ca.cert, tmp_path / "op")
    try:
        kube.apply(fleet_body("orders", 2, "tls-orders"), namespace=namespace)
        wait_until(lambda: condition(kube, namespace, "Ready").get("status") == "True", "Ready=True", timeout_s=90)
        wait_until(
            lambda: (
                {m["group_instance_id"] for m in tls_world.get("/v1/groups/tls-orders")["members"]}
                == {"orders-0", "orders-1"}
            ),
            "both members joined over https",
        )
    finally:
        operator.stop()
    assert not operator.forbidden(), operator.log()
    # The CA travels in the pod template (no ConfigMap written into the fleet's namespace: the chart grants none).
    assert kube.get("configmap", "orders-coordinator-ca", namespace=namespace) is None
    pod = kube.get("pod", "orders-0", namespace=namespace)
    assert pod["metadata"]["annotations"]["berth.dev/coordinator-ca"] == tls_world.ca.cert.read_text()
    consumer = pod["spec"]["containers"][0]
    assert {"name": "BERTH_CA_FILE", "value": "/etc/berth/coordinator-ca/ca.crt"} in consumer["env"]
    volume = next(v for v in pod["spec"]["volumes"] if v["name"] == "berth-coordinator-ca")
    assert volume["downwardAPI"]["items"] == [
        {
            "path": "ca.crt",
            "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.annotations['berth.dev/coordinator-ca']"},
        }
    ]


class TlsListener:
    """A TLS server with the coordinator's real certificate that records any bytes a client sends after the
    handshake (an HTTP request, with its Authorization header, would be those bytes)."""

    def __init__(self, cert: Pair) -> None:
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.context.load_cert_chain(str(cert.cert), str(cert.key))
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.socket.getsockname()[1])
        self.handshakes_tried = 0
        self.received: list[bytes] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.socket.accept()
            except OSError:
                return
            self.handshakes_tried += 1
            try:
                with self.context.wrap_socket(connection, server_side=True) as tls:
                    tls.settimeout(2)
                    data = tls.recv(65536)
                    if data:
                        self.received.append(data)
            except (OSError, ssl.SSLError):
                connection.close()

    def close(self) -> None:
        self.socket.close()


def test_a_coordinator_whose_certificate_the_ca_does_not_verify_gets_no_token(
    kube: Kube, namespace: str, tls_world: TlsWorld, tmp_path: Path
) -> None:
    listener = TlsListener(tls_world.cert)
    url = f"https://127.0.0.1:{listener.port}"
    operator = start_operator(tls_world, namespace, url, tls_world.other_ca.cert, tmp_path / "op")
    try:
        kube.apply(fleet_body("orders", 1, "tls-wrong-ca"), namespace=namespace)
        reachable = wait_until(
            lambda: (c := condition(kube, namespace, "CoordinatorReachable")).get("status") == "False" and c,
            "CoordinatorReachable=False",
        )
        assert reachable["reason"] == "TLSVerificationFailed", reachable
        assert reachable["message"].startswith(f"TLS verification of the coordinator at {url} failed")
        warnings = wait_until(
            lambda: [
                e
                for e in kube.events(namespace, kind="ConsumerFleet", name="orders")
                if e["reason"] == "CoordinatorTLSVerificationFailed"
            ],
            "the Warning Event",
        )
        assert warnings[0]["type"] == "Warning"
    finally:
        operator.stop()
        listener.close()
    assert listener.handshakes_tried >= 1  # it did try, and stopped at the certificate
    assert listener.received == []  # not a byte of HTTP: no request, no token
    assert ADMIN_TOKEN not in operator.log()
    assert kube.get("statefulset", "orders", namespace=namespace) is None
