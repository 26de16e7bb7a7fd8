"""A real Kubernetes node on this machine, in a network namespace of its own: pods that run images.

``Node.start()`` builds, in this order (every name carries a per-run suffix, so runs coexist on one machine):

- **the network** (``support.node_network``): a namespace of the node's own joined to this machine by a veth pair,
  the pods' bridge inside it, nothing routed out of it.
- **its control plane**: a ``ControlPlane`` of its own serving on the host end of the link, so the kubelet, the
  pods (through the ``kubernetes`` Service, whose endpoints the apiserver keeps) and ``kubectl`` on this machine all
  reach it. (The control-plane tier's plane has no scheduler and its fake kubelet binds pods itself; a scheduler
  there would race it for every pod, so the node tier does not share it.)
- **containerd** (``support.node_configs``: private config, root, state and socket under the work directory; runc
  through ``../shared/tools/k8s/node/runc-oom-clamp``; the CNI bridge), **kubelet** and **kube-proxy** (iptables
  mode) inside the network namespace, **kube-scheduler** beside the apiserver, and **cluster DNS**:
  ``support.node_dns``, a small responder for ``<service>.<namespace>.svc.cluster.local`` (and StatefulSet pods'
  names under their governing Service) from a list+watch of Services and Endpoints, on the node's address, which
  the kubelet gives pods as their nameserver. There is no upstream resolver: only cluster names resolve.
- **storage**: ``PersistentVolume``s of the empty storage class on directories of the work directory, which claims
  with no class (the chart's coordinator and etcd members, a stateful fleet's) bind to.

``stop()`` ends every process
it started by PID (containers first, through runc's state root), unmounts what the node mounted under its work
directory, deletes the namespace and the work directory.

Binaries: ``kubelet``, ``kube-proxy`` and ``kube-scheduler`` beside the control plane's (``support.kube_cluster``),
containerd, runc, the CNI plugins, iptables and nsenter from Debian (``scripts/ensure-node.sh``, from
``make install``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from support.kube_cluster import REPO, Binaries, ControlPlane, kubeconfig_text, sign_certificate, stop_process
from support.net import free_port
from support.node_configs import CLUSTER_DOMAIN, cni_conflist, containerd_toml, kubelet_config
from support.node_network import NodeNetwork, run
from support.node_reap import (
    end_shims,
    register,
    remove_containers,
    remove_pod_logs,
    start_guard,
    unmount_under,
    unregister,
)

CLAMP = REPO.parent / "shared" / "tools" / "k8s" / "node" / "runc-oom-clamp"
CNI_BIN = Path("/usr/lib/cni")
RUNC = Path("/usr/sbin/runc")
NODE_TOOLS = ("containerd", "ctr", "runc", "iptables", "ip", "nsenter")
HOW_TO_GET = (
    "the node tier needs kubelet, kube-proxy and kube-scheduler beside the control plane's binaries "
    "(../shared/tools/k8s/bin), ../shared/tools/k8s/node/runc-oom-clamp, root, and Debian's containerd, runc, "
    "containernetworking-plugins, buildah, debootstrap, busybox-static and iptables (make install runs "
    "scripts/ensure-node.sh)"
)


def support_env() -> dict[str, str]:
    """The environment of a process running one of the tests' support modules (``python -m support....``)."""
    return {**os.environ, "PYTHONPATH": str(REPO / "tests")}


def missing_pieces(binaries: Binaries | None) -> list[str]:
    """What this machine lacks for a node (empty when it can run one)."""
    missing = []
    if binaries is None:
        missing.append("the control plane's binaries")
    else:
        missing += [name for name in ("kubelet", "kube-proxy", "kube-scheduler") if not node_binary(binaries, name)]
    if os.geteuid() != 0:
        missing.append("root")
    if not CLAMP.is_file():
        missing.append(str(CLAMP.relative_to(REPO.parent)))
    missing += [tool for tool in NODE_TOOLS if not _which(tool)]
    if not (CNI_BIN / "bridge").is_file():
        missing.append("the CNI plugins (/usr/lib/cni)")
    return missing


def _which(tool: str) -> str | None:
    return shutil.which(tool) or next(
        (str(p) for p in (Path("/usr/sbin", tool), Path("/sbin", tool)) if p.exists()), None
    )


def node_binary(binaries: Binaries, name: str) -> Path | None:
    path = binaries.apiserver.parent / name
    return path if path.is_file() else None


@dataclass
class Node:
    """One node (see the module docstring): ``start()``, then ``kubeconfig``/``server`` for clients, ``stop()``."""

    binaries: Binaries
    workdir: Path
    name: str = "berth-node"
    network: NodeNetwork = field(default_factory=NodeNetwork.choose)
    pv_count: int = 8
    #: Directories a later session's reaper removes with the node when this run dies without stopping it.
    reap_also: tuple[Path, ...] = ()
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    plane: ControlPlane | None = None
    kubelet_port: int = 0

    # ------------------------------------------------------------------------------------------------ paths

    @property
    def socket(self) -> Path:
        return self.workdir / "containerd.sock"

    @property
    def runc_root(self) -> Path:
        return self.workdir / "runc"

    @property
    def kubeconfig(self) -> Path:
        assert self.plane is not None
        return self.plane.kubeconfig

    @property
    def server(self) -> str:
        assert self.plane is not None
        return self.plane.server

    def log(self, name: str) -> str:
        path = self.workdir / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def _spawn(self, name: str, argv: list[str]) -> None:
        log = open(self.workdir / f"{name}.log", "wb")  # noqa: SIM115 - the process owns it until stop()
        self.processes[name] = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=support_env()
        )

    def _check_alive(self) -> None:
        for name, proc in self.processes.items():
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {proc.returncode}:\n{self.log(name)[-4000:]}")

    # ------------------------------------------------------------------------------------------------ start

    def start(self, pause_archive: Path, timeout_s: float = 180.0) -> Node:
        self.workdir.mkdir(parents=True, exist_ok=True)
        # Recorded first: a run killed before stop() leaves everything below to the next session's reap_stale().
        register(self.network.netns, self.network.host_if, self.workdir, self.reap_also)
        start_guard(self.network.netns)  # and reaped by it at once, if this run dies without stop()
        self.network.create()
        self.plane = ControlPlane(
            self.binaries,
            self.workdir / "plane",
            address=self.network.host_ip,
            controllers="*",
            # A busy machine may delay the kubelet's status for a while: do not call the node lost too soon.
            controller_flags=("--node-monitor-grace-period=120s",),
        )
        self.plane.start()
        self._client_configs()
        self._start_containerd()
        self.import_image(pause_archive)
        self._start_kubelet()
        self._spawn(
            "kube-scheduler",
            [
                str(node_binary(self.binaries, "kube-scheduler")),
                f"--kubeconfig={self.workdir / 'scheduler.kubeconfig'}",
                f"--authentication-kubeconfig={self.workdir / 'scheduler.kubeconfig'}",
                f"--authorization-kubeconfig={self.workdir / 'scheduler.kubeconfig'}",
                "--bind-address=127.0.0.1",
                f"--secure-port={free_port()}",
                "--leader-elect=false",
            ],
        )
        self._spawn(
            "kube-proxy",
            self.network.inside(
                str(node_binary(self.binaries, "kube-proxy")),
                f"--kubeconfig={self.workdir / 'proxy.kubeconfig'}",
                f"--hostname-override={self.name}",
                "--proxy-mode=iptables",
                f"--cluster-cidr={self.network.pod_cidr}",
                f"--bind-address={self.network.node_ip}",
                f"--healthz-bind-address=127.0.0.1:{free_port()}",
                f"--metrics-bind-address=127.0.0.1:{free_port()}",
                # Leave the machine-wide conntrack settings alone.
                "--conntrack-max-per-core=0",
                "--conntrack-tcp-timeout-established=0",
                "--conntrack-tcp-timeout-close-wait=0",
            ),
        )
        self._spawn(
            "dns",
            self.network.inside(
                sys.executable,
                "-m",
                "support.node_dns",
                "--listen",
                self.network.node_ip,
                "--kubeconfig",
                str(self.kubeconfig),
                "--domain",
                CLUSTER_DOMAIN,
            ),
        )
        self._wait_ready(timeout_s)
        self._persistent_volumes()
        return self

    def _client_configs(self) -> None:
        assert self.plane is not None
        pki = self.plane.pki
        for name, subject in (
            ("kubelet", f"/O=system:nodes/CN=system:node:{self.name}"),
            ("scheduler", "/CN=system:kube-scheduler"),
            ("proxy", "/CN=system:kube-proxy"),
        ):
            sign_certificate(pki, name, subject)
            (self.workdir / f"{name}.kubeconfig").write_text(
                kubeconfig_text(
                    self.plane.server, pki / "ca.crt", cert=pki / f"{name}.crt", key=pki / f"{name}.key", user=name
                )
            )

    def _start_containerd(self) -> None:
        w = self.workdir
        (w / "cni").mkdir()
        (w / "cni" / "10-berth-node.conflist").write_text(json.dumps(cni_conflist(w, self.network)))
        config = containerd_toml(w, self.socket, self.runc_root, CLAMP, CNI_BIN)
        (w / "containerd.toml").write_text(config)
        containerd = _which("containerd")
        assert containerd is not None
        self._spawn("containerd", self.network.inside(containerd, "--config", str(w / "containerd.toml")))
        deadline = time.monotonic() + 60
        while run("ctr", "--address", str(self.socket), "version", check=False).returncode != 0:
            self._check_alive()
            if time.monotonic() > deadline:
                raise RuntimeError(f"containerd did not answer within 60 s:\n{self.log('containerd')[-3000:]}")
            time.sleep(0.2)

    def import_image(self, archive: Path) -> None:
        """An OCI archive into the node's image store (containerd's ``k8s.io`` namespace, where the kubelet looks)."""
        run("ctr", "--address", str(self.socket), "-n", "k8s.io", "images", "import", str(archive))

    def images(self) -> list[str]:
        out = run("ctr", "--address", str(self.socket), "-n", "k8s.io", "images", "ls", "-q").stdout
        return out.split()

    def start_kfake(self, kfake: Path, configs: tuple[str, ...], timeout_s: float = 30.0) -> str:
        """kfake (a Kafka-protocol broker that listens on, and advertises, 127.0.0.1 only) inside the node's network
        namespace, so that pods on the node's network (``hostNetwork: true``) reach it at the address it advertises;
        its bootstrap address there. Stopped with the node."""
        port = free_port()
        args = [str(kfake), "-port", str(port), "-log-level", "warn"]
        for config in configs:
            args += ["-c", config]
        self._spawn("kfake", self.network.inside(*args))
        deadline = time.monotonic() + timeout_s
        while f"listening 127.0.0.1:{port}" not in self.log("kfake"):
            self._check_alive()
            if time.monotonic() > deadline:
                raise RuntimeError(f"kfake did not listen within {timeout_s:g} s:\n{self.log('kfake')}")
            time.sleep(0.1)
        return f"127.0.0.1:{port}"

    def run_inside(self, *argv: str) -> subprocess.CompletedProcess[str]:
        """A command in the node's network namespace (PYTHONPATH: the tests' support package), to completion."""
        return subprocess.run(self.network.inside(*argv), capture_output=True, text=True, env=support_env(), check=True)

    def kill_container(self, container_id: str) -> None:
        """SIGKILL a container's process in place, as a crash would (the kubelet restarts it in the same pod)."""
        run("ctr", "--address", str(self.socket), "-n", "k8s.io", "tasks", "kill", "--signal", "SIGKILL", container_id)

    def _start_kubelet(self) -> None:
        assert self.plane is not None
        w = self.workdir
        (w / "resolv.conf").write_text("")
        self.kubelet_port = free_port()
        ca = self.plane.pki / "ca.crt"
        config = kubelet_config(w, self.network, self.socket, ca, self.kubelet_port, free_port())
        (w / "kubelet.yaml").write_text(yaml.safe_dump(config))
        self._spawn(
            "kubelet",
            self.network.inside(
                str(node_binary(self.binaries, "kubelet")),
                f"--config={w / 'kubelet.yaml'}",
                f"--kubeconfig={w / 'kubelet.kubeconfig'}",
                f"--root-dir={w / 'kubelet'}",
                f"--cert-dir={w / 'kubelet-pki'}",
                f"--hostname-override={self.name}",
                f"--node-ip={self.network.node_ip}",
            ),
        )

    def _kubectl(self, *args: str, input: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
        from support.kube import find_tool

        kubectl = find_tool("kubectl")
        assert kubectl is not None
        argv = [kubectl, f"--kubeconfig={self.kubeconfig}", *args]
        result = subprocess.run(argv, input=input, capture_output=True, text=True, check=False, timeout=120)
        if check and result.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)} exited {result.returncode}: {result.stderr}")
        return result

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            self._check_alive()
            answer = self._kubectl("get", "node", self.name, "-o", "json", check=False)
            if answer.returncode == 0:
                node = json.loads(answer.stdout)
                conditions = {c["type"]: c["status"] for c in node["status"].get("conditions") or []}
                taints = [t["key"] for t in node["spec"].get("taints") or []]
                dns_answering = "answering on" in self.log("dns")  # once its lists are in
                if conditions.get("Ready") == "True" and not taints and dns_answering:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"node {self.name} not Ready after {timeout_s:g} s:\n{self.log('kubelet')[-4000:]}")
            time.sleep(0.5)
        # Namespaces get their default ServiceAccount from the controller-manager a moment after it starts.
        while self._kubectl("get", "serviceaccount", "default", "-n", "default", check=False).returncode != 0:
            if time.monotonic() > deadline:
                raise RuntimeError("no default ServiceAccount")
            time.sleep(0.5)

    def _persistent_volumes(self) -> None:
        volumes = []
        for index in range(self.pv_count):
            directory = self.workdir / "volumes" / f"pv-{index}"
            directory.mkdir(parents=True)
            directory.chmod(0o777)  # hostPath volumes get no fsGroup: any pod user may write
            volumes.append(
                {
                    "apiVersion": "v1",
                    "kind": "PersistentVolume",
                    "metadata": {"name": f"{self.name}-pv-{index}", "labels": {"berth.dev/node-volume": "true"}},
                    "spec": {
                        # Nominal (hostPath has no size): as large as the chart's largest default claim (etcd's 8Gi).
                        "capacity": {"storage": "10Gi"},
                        "accessModes": ["ReadWriteOnce"],
                        "persistentVolumeReclaimPolicy": "Retain",
                        "storageClassName": "",
                        "hostPath": {"path": str(directory), "type": "Directory"},
                    },
                }
            )
        self._kubectl("apply", "-f", "-", input=yaml.safe_dump_all(volumes))

    # ------------------------------------------------------------------------------------------------- stop

    def stop(self) -> None:
        pod_uids = self._pod_uids()
        for name in ("kubelet", "kube-proxy", "kube-scheduler", "dns", "kfake"):
            self._end(name)
        remove_containers(self.runc_root)
        self._end("containerd")
        end_shims(self.socket)
        if self.plane is not None:
            self.plane.stop()
        unmount_under(self.workdir)
        self.network.delete()
        remove_pod_logs(pod_uids)
        shutil.rmtree(self.workdir, ignore_errors=True)
        unregister(self.network.netns)

    def _end(self, name: str) -> None:
        stop_process(self.processes.pop(name, None), timeout_s=15)

    def _pod_uids(self) -> list[str]:
        if self.plane is None or "kubelet" not in self.processes:
            return []
        answer = self._kubectl("get", "pods", "-A", "-o", "jsonpath={.items[*].metadata.uid}", check=False)
        return answer.stdout.split() if answer.returncode == 0 else []
