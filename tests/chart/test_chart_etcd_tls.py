"""The chart's etcd (coordinator.ha) with the TLS it renders, started for real: a three-member etcd cluster on
loopback run with exactly the TLS flags and the certificates ``helm template --set coordinator.ha.enabled=true``
renders (only the addresses, names and data directories are this machine's), its members reaching each other over
peer TLS with the chart's certificate; then a client without a certificate, and one with a certificate of another
CA, are refused on the client port and on the peer port, and the coordinator's own etcd client, configured from
the coordinator's rendered command line with the client certificate the chart made, is served.
"""

from __future__ import annotations

import base64
import contextlib
import json
import socket
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from chart_helpers import Obj, render
from support.certs import make_ca, make_server_cert
from support.ci import unavailable
from support.net import free_ports

from berth.coordinator.command.main import build_parser as coordinator_parser
from berth.coordinator.http.replicas import replication_config
from berth.coordinator.store.etcd.client import EtcdClient, EtcdUnavailable, b64
from berth.operator.local.etcd_cluster import etcd_binary

pytestmark = [pytest.mark.tools, pytest.mark.etcd]

MEMBERS = 3
#: Flags of the rendered etcd that say where this member is: replaced by this machine's; every other flag (TLS
#: included) is passed as rendered.
PLACE_FLAGS = (
    "--name",
    "--data-dir",
    "--listen-client-urls",
    "--advertise-client-urls",
    "--listen-peer-urls",
    "--initial-advertise-peer-urls",
    "--listen-metrics-urls",
    "--initial-cluster",
    "--initial-cluster-token",
)


def one(docs: list[Obj], kind: str, name: str) -> Obj:
    (found,) = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    return found


@dataclass
class Rendered:
    etcd_args: list[str]
    coordinator_args: list[str]
    secrets: dict[str, dict[str, bytes]]  # name -> key -> content


@pytest.fixture(scope="module")
def rendered(helm_bin: str) -> Rendered:
    docs = render({"coordinator": {"ha": {"enabled": True}}})
    statefulset = one(docs, "StatefulSet", "berth-etcd")
    coordinator = one(docs, "StatefulSet", "berth-coordinator")["spec"]["template"]["spec"]["containers"][0]
    secrets = {
        name: {key: base64.b64decode(value) for key, value in one(docs, "Secret", name)["data"].items()}
        for name in ("berth-etcd-tls", "berth-etcd-client-tls")
    }
    return Rendered(statefulset["spec"]["template"]["spec"]["containers"][0]["args"], coordinator["args"], secrets)


@dataclass
class Cluster:
    client_urls: list[str]
    peer_ports: list[int]
    files: Path  # the rendered Secrets' files, as the pods mount them


def _mounted(rendered: Rendered, files: Path) -> None:
    """The Secrets as the pods see them: the members' at /etc/etcd/tls, the client's at /etc/berth/etcd."""
    for name, where in (("berth-etcd-tls", "etcd-tls"), ("berth-etcd-client-tls", "etcd-client")):
        (files / where).mkdir(parents=True)
        for key, content in rendered.secrets[name].items():
            (files / where / key).write_bytes(content)


def _local(arg: str, files: Path) -> str:
    return arg.replace("/etc/etcd/tls/", f"{files}/etcd-tls/").replace("/etc/berth/etcd/", f"{files}/etcd-client/")


@pytest.fixture(scope="module")
def cluster(rendered: Rendered, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    binary = etcd_binary()
    if binary is None:
        unavailable("etcd is not on PATH (make install runs scripts/ensure-etcd.sh; or set BERTH_ETCD)")
    assert binary is not None
    work = tmp_path_factory.mktemp("etcd-tls")
    files = work / "files"
    _mounted(rendered, files)
    kept = [_local(a, files) for a in rendered.etcd_args if a.split("=", 1)[0] not in PLACE_FLAGS]
    ports = free_ports(3 * MEMBERS)
    clients, peers, metrics = ports[:MEMBERS], ports[MEMBERS : 2 * MEMBERS], ports[2 * MEMBERS :]
    initial = ",".join(f"m{i}=https://127.0.0.1:{peers[i]}" for i in range(MEMBERS))
    processes = []
    try:
        for i in range(MEMBERS):
            argv = [
                binary,
                f"--name=m{i}",
                f"--data-dir={work / f'm{i}'}",
                f"--listen-client-urls=https://127.0.0.1:{clients[i]}",
                f"--advertise-client-urls=https://127.0.0.1:{clients[i]}",
                f"--listen-peer-urls=https://127.0.0.1:{peers[i]}",
                f"--initial-advertise-peer-urls=https://127.0.0.1:{peers[i]}",
                f"--listen-metrics-urls=http://127.0.0.1:{metrics[i]}",
                f"--initial-cluster={initial}",
                "--initial-cluster-token=berth-etcd-tls-test",
                "--unsafe-no-fsync",
                *kept,
            ]
            log = open(work / f"m{i}.log", "wb")  # noqa: SIM115 - the member writes it until it ends
            processes.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
            log.close()
        deadline = time.monotonic() + 60
        while not all(_healthy(port) for port in metrics):
            for i, process in enumerate(processes):
                assert process.poll() is None, (work / f"m{i}.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the members did not form a cluster over peer TLS within 60 s"
            time.sleep(0.3)
        yield Cluster([f"https://127.0.0.1:{port}" for port in clients], peers, files)
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=10)
            if process.poll() is None:
                process.kill()
                process.wait()


def _healthy(metrics_port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/health", timeout=2) as answer:
            return bool(json.loads(answer.read()).get("health") == "true")
    except (OSError, ValueError):
        return False


def _handshake(port: int, context: ssl.SSLContext) -> str:
    """Open a TLS connection to ``port`` and send one gateway request: the answer's first line, or the error."""
    try:
        with (
            socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
            context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
        ):
            body = json.dumps({"key": b64(b"/berth/")}).encode()
            head = f"POST /v3/kv/range HTTP/1.1\r\nHost: etcd\r\nContent-Length: {len(body)}\r\n\r\n"
            tls.sendall(head.encode() + body)
            answer = tls.recv(200)
            return answer.decode(errors="replace").split("\r\n", 1)[0] if answer else "closed"
    except (ssl.SSLError, OSError) as error:
        return f"refused: {error}"


def test_the_rendered_etcd_refuses_every_client_and_peer_without_a_certificate_of_its_ca(
    rendered: Rendered, cluster: Cluster, tmp_path: Path
) -> None:
    ca = cluster.files / "etcd-client" / "ca.crt"
    without = ssl.create_default_context(cafile=str(ca))  # verifies etcd, presents nothing
    stranger_ca = make_ca(tmp_path / "other", "other-ca")
    stranger = make_server_cert(tmp_path / "other", stranger_ca, 5, "intruder")
    foreign = ssl.create_default_context(cafile=str(ca))
    foreign.load_cert_chain(str(stranger.cert), str(stranger.key))
    client_ports = [int(url.rsplit(":", 1)[1]) for url in cluster.client_urls]
    for port in [*client_ports, *cluster.peer_ports]:
        for context in (without, foreign):
            said = _handshake(port, context)
            assert said.startswith("refused") or said == "closed", f"port {port} answered {said!r}"
    # A plain http client is not served either.
    plain = EtcdClient([cluster.client_urls[0].replace("https", "http")], timeout_s=3)
    with pytest.raises(EtcdUnavailable):
        plain.range(b"/berth/", b"/berth0", count_only=True)


def test_the_coordinators_rendered_client_is_served(rendered: Rendered, cluster: Cluster) -> None:
    args = [_local(a, cluster.files) for a in rendered.coordinator_args[1:]]
    parsed = coordinator_parser().parse_args(args)
    config = replication_config(parsed)
    assert config is not None and config.endpoints[0].startswith("https://")
    client = EtcdClient(cluster.client_urls, timeout_s=5, tls=config.tls())
    answer = client.txn([], [{"request_put": {"key": b64(b"/berth/tls-check"), "value": b64(b"served")}}])
    assert answer.get("succeeded") is True
    _, _, _, count = client.range(b"/berth/tls-check", b"/berth/tls-check\x00", count_only=True)
    assert count == 1
    # The same handshake as the refused ones, with the chart's client certificate: served.
    tls = config.tls()
    assert tls is not None
    context = tls.ssl_context()
    assert _handshake(int(cluster.client_urls[1].rsplit(":", 1)[1]), context).startswith("HTTP/1.1 200")
