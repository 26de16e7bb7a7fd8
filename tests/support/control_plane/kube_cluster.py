"""A real Kubernetes control plane for tests: etcd, kube-apiserver and kube-controller-manager on loopback.

``ControlPlane.start()`` makes its own PKI with ``openssl`` (a CA, the apiserver's serving certificate, a
service-account key pair, an admin client certificate in ``system:masters`` and one for the controller-manager),
starts the three processes, waits for ``/readyz`` and writes an admin kubeconfig. ``stop()`` ends them by PID.

By default there is no scheduler and no kubelet: pods are created by the StatefulSet controller and never run
(``fake_kubelet`` marks them Ready and runs a member process per pod). Unscheduled pods are deleted at once.
``ControlPlane(..., address=IP)`` serves the API on another address of this machine (the node tier's: the host end
of its network namespace's link, which pods reach through the ``kubernetes`` Service); the apiserver then keeps that
Service's endpoints itself and the serving certificate names the address. ``sign_certificate`` signs more client
identities (a kubelet's, the scheduler's) with the plane's CA.

The API server keeps an audit log of the requests of ``audited_groups``' members (by default every ServiceAccount of
namespace ``berth``, where the tests and benchmarks install the chart whose identity the operator runs as): one
line per request as it is received, with its verb, object, user and User-Agent (:meth:`ControlPlane.audit`), so a
test or a benchmark counts exactly what the operator asked. With ``audit_lease_writes``, writes to Leases are logged
instead once answered, with the object sent and the answer's status (level Request, stage ResponseComplete): the
history of who held a leader's Lease, and when each write took it (``support.leader_history``).

ConfigMaps have no watch cache in this API server (``--watch-cache-sizes=configmaps#0``): their watches are served
by etcd, so a test can make a watch expire as a long absence does in a real cluster (:meth:`ControlPlane.compact`
compacts etcd's history; a watch resumed from before it is answered 410 Gone). Everything else is cached as usual.

Binaries are found like controller-runtime's envtest: ``KUBEBUILDER_ASSETS``, then ``BERTH_K8S_BIN_DIR``, then
``../shared/tools/k8s/bin`` beside the repository; etcd in the same directory or on ``PATH`` (Debian's
``etcd-server``, installed by ``scripts/ensure-etcd.sh``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import ssl
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from support.net import free_ports

REPO = Path(__file__).resolve().parents[3]
DEFAULT_BIN_DIR = REPO.parent / "shared" / "tools" / "k8s" / "bin"
HOW_TO_GET = (
    "the real control-plane tier needs kube-apiserver and kube-controller-manager (set KUBEBUILDER_ASSETS or "
    "BERTH_K8S_BIN_DIR, or put ../shared/tools/k8s/bin beside the repository) and etcd (make install runs "
    "scripts/ensure-etcd.sh)"
)


@dataclass(frozen=True)
class Binaries:
    apiserver: Path
    controller_manager: Path
    etcd: Path


def find_binaries() -> Binaries | None:
    """The control-plane binaries, or None when any is missing."""
    dirs = [os.environ.get("KUBEBUILDER_ASSETS"), os.environ.get("BERTH_K8S_BIN_DIR"), str(DEFAULT_BIN_DIR)]
    for directory in (Path(d) for d in dirs if d):
        apiserver, kcm = directory / "kube-apiserver", directory / "kube-controller-manager"
        if apiserver.is_file() and kcm.is_file():
            etcd = directory / "etcd" if (directory / "etcd").is_file() else shutil.which("etcd")
            if etcd is None:
                return None
            return Binaries(apiserver, kcm, Path(etcd))
    return None


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_pki(pki: Path, address: str = "127.0.0.1") -> None:
    """CA, serving cert for 127.0.0.1 (and ``address``), service-account keys, and client certs for the admin and the
    controllers."""
    pki.mkdir(parents=True, exist_ok=True)
    _openssl(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
        "-days",
        "2",
        "-subj",
        "/CN=berth-test-ca",
        cwd=pki,
    )
    _openssl("genrsa", "-out", "sa.key", "2048", cwd=pki)
    _openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=pki)
    (pki / "server.ext").write_text(
        f"subjectAltName=IP:127.0.0.1,IP:{address},DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,"
        "DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:10.0.0.1\n"
        "extendedKeyUsage=serverAuth\n"
    )
    sign_certificate(pki, "server", "/CN=kube-apiserver", "server.ext")
    sign_certificate(pki, "admin", "/O=system:masters/CN=berth-test-admin")
    sign_certificate(pki, "kcm", "/CN=system:kube-controller-manager")


def sign_certificate(pki: Path, name: str, subject: str, ext: str | None = None) -> None:
    """``name.key`` and ``name.crt`` for ``subject``, signed by the CA in ``pki``."""
    request = ["req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr"]
    _openssl(*request, "-subj", subject, cwd=pki)
    sign = ["x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial"]
    _openssl(*sign, "-out", f"{name}.crt", "-days", "2", *(["-extfile", ext] if ext else []), cwd=pki)


def kubeconfig_text(
    server: str,
    ca: Path,
    *,
    cert: Path | None = None,
    key: Path | None = None,
    token: str | None = None,
    user: str = "user",
) -> str:
    """A kubeconfig for one user: a client certificate or a bearer token."""
    if token is not None:
        credentials = f"    token: {token}\n"
    else:
        credentials = f"    client-certificate: {cert}\n    client-key: {key}\n"
    return (
        "apiVersion: v1\nkind: Config\n"
        f"clusters:\n- name: berth-test\n  cluster:\n    server: {server}\n    certificate-authority: {ca}\n"
        f"users:\n- name: {user}\n  user:\n{credentials}"
        f"contexts:\n- name: berth-test\n  context:\n    cluster: berth-test\n    user: {user}\n"
        "current-context: berth-test\n"
    )


def audit_policy(groups: tuple[str, ...], *, lease_writes: bool = False) -> str:
    """Metadata of every request by a member of ``groups``, once, when it is received; nothing else. With
    ``lease_writes``, a write to a Lease is logged once answered instead, with its object and the answer's status."""
    listed = ", ".join(json.dumps(group) for group in groups)
    leases = (
        f"- level: Request\n  userGroups: [{listed}]\n  verbs: [create, update, patch, delete]\n"
        "  resources: [{group: coordination.k8s.io, resources: [leases]}]\n  omitStages: [RequestReceived]\n"
    )
    return (
        "apiVersion: audit.k8s.io/v1\nkind: Policy\n"
        "omitStages: [ResponseStarted, Panic]\n"
        f"rules:\n{leases if lease_writes else ''}"
        f"- level: Metadata\n  userGroups: [{listed}]\n  omitStages: [ResponseComplete]\n- level: None\n"
    )


@dataclass
class ControlPlane:
    binaries: Binaries
    workdir: Path
    #: The address the apiserver binds and advertises (an address of this machine).
    address: str = "127.0.0.1"
    #: Controllers of kube-controller-manager (its --controllers).
    controllers: str = "*,-nodelifecycle"
    #: More kube-controller-manager flags.
    controller_flags: tuple[str, ...] = ()
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    server: str = ""
    etcd_url: str = ""
    audited_groups: tuple[str, ...] = ("system:serviceaccounts:berth",)
    #: Log writes to Leases once answered, with the object and the answer (see the module docstring).
    audit_lease_writes: bool = False

    @property
    def audit_log(self) -> Path:
        return self.workdir / "audit.log"

    def audit(self, since: int = 0) -> tuple[list[dict[str, Any]], int]:
        """The audit events logged from byte ``since`` of the log on, and the offset to read from next time."""
        if not self.audit_log.exists():
            return [], since
        with self.audit_log.open("rb") as log:
            log.seek(since)
            data = log.read()
        complete = data[: data.rfind(b"\n") + 1]
        return [json.loads(line) for line in complete.splitlines() if line.strip()], since + len(complete)

    def audit_offset(self) -> int:
        """Where the audit log ends now: read from here to see only what comes next."""
        return self.audit(0)[1] if self.audit_log.exists() else 0

    @property
    def pki(self) -> Path:
        return self.workdir / "pki"

    @property
    def kubeconfig(self) -> Path:
        return self.workdir / "admin.kubeconfig"

    def log(self, name: str) -> str:
        path = self.workdir / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def _spawn(self, name: str, argv: list[str]) -> None:
        log = open(self.workdir / f"{name}.log", "wb")  # noqa: SIM115 - the process owns it until stop()
        self.processes[name] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def start(self, timeout_s: float = 90.0) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        make_pki(self.pki, self.address)
        pki = self.pki
        etcd_port, etcd_peer, etcd_metrics, api_port, kcm_port = free_ports(5)
        etcd_url = self.etcd_url = f"http://127.0.0.1:{etcd_port}"
        self._spawn(
            "etcd",
            [
                str(self.binaries.etcd),
                "--data-dir",
                str(self.workdir / "etcd"),
                "--name",
                "berth-test",
                "--listen-client-urls",
                etcd_url,
                "--advertise-client-urls",
                etcd_url,
                "--listen-peer-urls",
                f"http://127.0.0.1:{etcd_peer}",
                "--initial-advertise-peer-urls",
                f"http://127.0.0.1:{etcd_peer}",
                "--initial-cluster",
                f"berth-test=http://127.0.0.1:{etcd_peer}",
                "--listen-metrics-urls",
                f"http://127.0.0.1:{etcd_metrics}",
                "--unsafe-no-fsync",  # test data: durability of etcd is not under test, speed on a shared disk is
            ],
        )
        self.server = f"https://{self.address}:{api_port}"
        loopback = self.address == "127.0.0.1"
        self._spawn(
            "kube-apiserver",
            [
                str(self.binaries.apiserver),
                f"--bind-address={self.address}",
                f"--advertise-address={self.address}",
                f"--secure-port={api_port}",
                f"--etcd-servers={etcd_url}",
                f"--client-ca-file={pki / 'ca.crt'}",
                f"--tls-cert-file={pki / 'server.crt'}",
                f"--tls-private-key-file={pki / 'server.key'}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={pki / 'sa.pub'}",
                f"--service-account-signing-key-file={pki / 'sa.key'}",
                "--service-cluster-ip-range=10.0.0.0/24",
                "--authorization-mode=Node,RBAC",
                # On loopback no pod could use the `kubernetes` Service's endpoints; elsewhere the apiserver keeps them.
                "--endpoint-reconciler-type=none" if loopback else "--endpoint-reconciler-type=lease",
                # A node's name need not resolve here; its InternalIP is reachable (logs, exec, port-forward).
                "--kubelet-preferred-address-types=InternalIP,Hostname",
                "--profiling=false",
                f"--audit-policy-file={self._write_audit_policy()}",
                f"--audit-log-path={self.audit_log}",
                "--audit-log-format=json",
                "--audit-log-maxsize=0",
                "--watch-cache-sizes=configmaps#0",
            ],
        )
        self.kubeconfig.write_text(
            kubeconfig_text(self.server, pki / "ca.crt", cert=pki / "admin.crt", key=pki / "admin.key", user="admin")
        )
        kcm_config = self.workdir / "kcm.kubeconfig"
        kcm_config.write_text(
            kubeconfig_text(self.server, pki / "ca.crt", cert=pki / "kcm.crt", key=pki / "kcm.key", user="kcm")
        )
        self._wait_ready(timeout_s)
        self._spawn(
            "kube-controller-manager",
            [
                str(self.binaries.controller_manager),
                f"--kubeconfig={kcm_config}",
                "--bind-address=127.0.0.1",
                f"--secure-port={kcm_port}",
                # By default no node lifecycle controller: the tests' fake node sends no heartbeats, and that
                # controller would taint it unreachable and evict its pods a few minutes in.
                f"--controllers={self.controllers}",
                *self.controller_flags,
                "--leader-elect=false",
                f"--service-account-private-key-file={pki / 'sa.key'}",
                f"--root-ca-file={pki / 'ca.crt'}",
                "--use-service-account-credentials=true",
            ],
        )

    def compact(self) -> int:
        """Compact etcd's history up to now (what the API server does every few minutes); the revision compacted to."""

        def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
            request = urllib.request.Request(
                self.etcd_url + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
            )
            with urllib.request.urlopen(request, timeout=10) as answer:
                found: dict[str, Any] = json.loads(answer.read())
                return found

        revision = int(post("/v3/kv/range", {"key": "AA=="})["header"]["revision"])
        post("/v3/kv/compaction", {"revision": revision, "physical": True})
        return revision

    def _write_audit_policy(self) -> Path:
        path = self.workdir / "audit-policy.yaml"
        path.write_text(audit_policy(self.audited_groups, lease_writes=self.audit_lease_writes))
        return path

    def _wait_ready(self, timeout_s: float) -> None:
        context = ssl.create_default_context(cafile=str(self.pki / "ca.crt"))
        context.load_cert_chain(str(self.pki / "admin.crt"), str(self.pki / "admin.key"))
        deadline = time.monotonic() + timeout_s
        last = ""
        while time.monotonic() < deadline:
            for name, proc in self.processes.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited with {proc.returncode}:\n{self.log(name)[-3000:]}")
            try:
                with urllib.request.urlopen(f"{self.server}/readyz", context=context, timeout=2) as answer:
                    if answer.status == 200:
                        return
            except OSError as error:
                last = str(error)
            time.sleep(0.2)
        raise RuntimeError(
            f"kube-apiserver not ready after {timeout_s} s ({last}):\n{self.log('kube-apiserver')[-3000:]}"
        )

    def stop(self) -> None:
        for name in ("kube-controller-manager", "kube-apiserver", "etcd"):
            stop_process(self.processes.pop(name, None))


def stop_process(proc: subprocess.Popen[bytes] | None, timeout_s: float = 10.0) -> None:
    """SIGTERM to a process group this run started, SIGKILL after ``timeout_s``."""
    if proc is None or proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
