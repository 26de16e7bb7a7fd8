"""A real Kubernetes cluster on this machine, of one node or several, each in a network namespace of its own: pods
that run images.

``Cluster.start(nodes=N)`` builds, in this order (every name carries a per-run suffix, so runs coexist on one
machine):

- **the fabric** (``support.node_network``): one segment joining this machine and every node, nothing routed out.
- **the control plane**: a ``ControlPlane`` of its own serving on this machine's address on the fabric, so the
  kubelets, the pods (through the ``kubernetes`` Service, whose endpoints the apiserver keeps) and ``kubectl`` on
  this machine all reach it; its node lifecycle controller on, with a 60 s grace before a silent node is called
  lost (a busy machine may delay a kubelet's heartbeats; Kubernetes' default is 40 s). **kube-scheduler** beside it.
  (The control-plane tier's plane has no scheduler and its fake kubelet binds pods itself; a scheduler there would
  race it for every pod, so the node tier does not share it.)
- **storage**: ``PersistentVolume``s of the empty storage class on directories of the work directory, which claims
  with no class (the chart's coordinator and etcd members, a stateful fleet's) bind to. Every node mounts the same
  directories (they are this machine's), so a volume follows its pod to another node, as a network volume does.
- **the nodes** (:meth:`Cluster.add_node`, each a :class:`Node`): a network namespace of its own on the fabric, and
  a mount namespace of its own shared by its containerd and kubelet (there, ``/var/log/pods`` is the node's
  ``pod-logs`` directory: kubelets on one machine would otherwise remove each other's pod logs), with
  **containerd** (``support.node_configs``: private config, root, state and socket under the node's directory; runc
  through ``../shared/tools/k8s/node/runc-oom-clamp``; the CNI bridge), **kubelet** (labelled with its zone,
  ``topology.kubernetes.io/zone``), **kube-proxy** (iptables mode) and **cluster DNS** (``support.node_dns``, a small
  responder for ``<service>.<namespace>.svc.cluster.local`` and StatefulSet pods' names, from a list+watch of
  Services and Endpoints, on the node's address, which its kubelet gives pods as their nameserver; no upstream
  resolver: only cluster names resolve); every image imported. More nodes join later with :meth:`Cluster.grow`.

A node fails as a real one does: :meth:`Node.lose` cuts its network, its kubelet, kube-proxy, DNS, containerd and
every container at once (a power cut); :meth:`Cluster.replace` then removes what is left of it and starts a fresh
node in its zone. ``stop()`` ends every process it started by PID (containers first, through runc's state root),
unmounts what the nodes mounted under the work directory, deletes the namespaces and the work directory.

Binaries: ``kubelet``, ``kube-proxy`` and ``kube-scheduler`` beside the control plane's (``support.kube_cluster``),
containerd, runc, the CNI plugins, iptables and nsenter from Debian (``scripts/ensure-node.sh``, from
``make install``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from support.kube_cluster import REPO, Binaries, ControlPlane, kubeconfig_text, sign_certificate, stop_process
from support.net import free_port, free_ports
from support.node_configs import CLUSTER_DOMAIN, cni_conflist, containerd_toml, kubelet_config
from support.node_network import Fabric, NodeNetwork, run
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
ZONE_LABEL = "topology.kubernetes.io/zone"
HOSTNAME_LABEL = "kubernetes.io/hostname"
ZONES = ("zone-a", "zone-b", "zone-c")
#: The taint that tells Kubernetes a node is down for good (its pods may be deleted, their volumes detached).
OUT_OF_SERVICE = "node.kubernetes.io/out-of-service"
#: How long a silent node is given before the node lifecycle controller calls it lost (Ready Unknown).
NODE_MONITOR_GRACE_S = 60


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


def kubectl_run(
    kubeconfig: Path, *args: str, input: str | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    from support.kube import find_tool

    kubectl = find_tool("kubectl")
    assert kubectl is not None
    argv = [kubectl, f"--kubeconfig={kubeconfig}", *args]
    result = subprocess.run(argv, input=input, capture_output=True, text=True, check=False, timeout=120)
    if check and result.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)} exited {result.returncode}: {result.stderr}")
    return result


class _Processes:
    """Processes started by PID with their logs in ``workdir`` (``<name>.log``), ended by PID."""

    workdir: Path
    processes: dict[str, subprocess.Popen[bytes]]

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

    def _end(self, name: str) -> None:
        stop_process(self.processes.pop(name, None), timeout_s=15)


@dataclass
class Node(_Processes):
    """One node of a :class:`Cluster` (see the module docstring): ``start()``, ``lose()``, ``stop()``."""

    binaries: Binaries
    workdir: Path
    plane: ControlPlane
    network: NodeNetwork
    name: str = "berth-node"
    zone: str = ZONES[0]
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    kubelet_port: int = 0
    #: Set by lose(): the node's processes are gone and its network is cut.
    lost: bool = False

    # ------------------------------------------------------------------------------------------------ paths

    @property
    def socket(self) -> Path:
        return self.workdir / "containerd.sock"

    @property
    def runc_root(self) -> Path:
        return self.workdir / "runc"

    @property
    def kubeconfig(self) -> Path:
        return self.plane.kubeconfig

    @property
    def server(self) -> str:
        return self.plane.server

    # ------------------------------------------------------------------------------------------------ start

    def start(self, pause_archive: Path, timeout_s: float = 180.0) -> Node:
        self.workdir.mkdir(parents=True, exist_ok=True)
        # Recorded first: a run killed before stop() leaves everything below to the next session's reap_stale().
        register(self.network.netns, "", self.workdir)
        start_guard(self.network.netns)  # and reaped by it at once, if this run dies without stop()
        self.network.create()
        self._client_configs()
        self._start_containerd()
        self.import_image(pause_archive)
        self._start_kubelet()
        healthz_port, metrics_port = free_ports(2)
        self._spawn(
            "kube-proxy",
            self.network.inside(
                str(node_binary(self.binaries, "kube-proxy")),
                f"--kubeconfig={self.workdir / 'proxy.kubeconfig'}",
                f"--hostname-override={self.name}",
                "--proxy-mode=iptables",
                f"--cluster-cidr={self.network.pod_cidr}",
                f"--bind-address={self.network.node_ip}",
                f"--healthz-bind-address=127.0.0.1:{healthz_port}",
                f"--metrics-bind-address=127.0.0.1:{metrics_port}",
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
        return self

    def _client_configs(self) -> None:
        pki = self.plane.pki
        for name, subject in (
            ("kubelet", f"/O=system:nodes/CN=system:node:{self.name}"),
            ("proxy", "/CN=system:kube-proxy"),
        ):
            sign_certificate(pki, f"{self.name}-{name}", subject)
            (self.workdir / f"{name}.kubeconfig").write_text(
                kubeconfig_text(
                    self.plane.server,
                    pki / "ca.crt",
                    cert=pki / f"{self.name}-{name}.crt",
                    key=pki / f"{self.name}-{name}.key",
                    user=name,
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
        # A mount namespace of the node's own, shared with its kubelet (below), in which /var/log/pods is a directory
        # of the node's: kubelet 1.28 keeps pod logs there (not configurable), and a kubelet's garbage collection
        # removes the log directories of pods it does not run, which on one machine are the other nodes' pods.
        logs = w / "pod-logs"
        logs.mkdir()
        Path("/var/log/pods").mkdir(parents=True, exist_ok=True)  # the mount point (absent where no kubelet ran yet)
        self._spawn(
            "containerd",
            self.network.inside(
                "unshare", "--mount", "--propagation", "slave", "sh", "-c",
                f'mount --bind "{logs}" /var/log/pods && exec "$0" --config "$1"',
                containerd, str(w / "containerd.toml"),
            ),
        )  # fmt: skip
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
        name = f"kfake-{port}"
        self._spawn(name, self.network.inside(*args))
        deadline = time.monotonic() + timeout_s
        while f"listening 127.0.0.1:{port}" not in self.log(name):
            self._check_alive()
            if time.monotonic() > deadline:
                raise RuntimeError(f"kfake did not listen within {timeout_s:g} s:\n{self.log(name)}")
            time.sleep(0.1)
        return f"127.0.0.1:{port}"

    def relay(self, listen: tuple[str, int], target: tuple[str, int], timeout_s: float = 30.0) -> None:
        """A TCP relay in the node's network namespace (``support.tcp_proxy``), from ``listen`` to ``target``;
        stopped with the node."""
        name = f"relay-{listen[1]}"
        self._spawn(
            name,
            self.network.inside(
                sys.executable, "-m", "support.tcp_proxy", f"{listen[0]}:{listen[1]}", f"{target[0]}:{target[1]}"
            ),
        )
        deadline = time.monotonic() + timeout_s
        while "relaying" not in self.log(name):
            self._check_alive()
            if time.monotonic() > deadline:
                raise RuntimeError(f"the relay did not start within {timeout_s:g} s:\n{self.log(name)}")
            time.sleep(0.1)

    def run_inside(self, *argv: str) -> subprocess.CompletedProcess[str]:
        """A command in the node's network namespace (PYTHONPATH: the tests' support package), to completion."""
        return subprocess.run(self.network.inside(*argv), capture_output=True, text=True, env=support_env(), check=True)

    def ctr_tasks(self, *args: str) -> None:
        """``ctr tasks ARGS`` on this node's containerd (kill, pause, resume a container in place)."""
        run("ctr", "--address", str(self.socket), "-n", "k8s.io", "tasks", *args)

    def kill_container(self, container_id: str) -> None:
        """SIGKILL a container's process in place, as a crash would (the kubelet restarts it in the same pod)."""
        self.ctr_tasks("kill", "--signal", "SIGKILL", container_id)

    def _start_kubelet(self) -> None:
        w = self.workdir
        (w / "resolv.conf").write_text("")
        self.kubelet_port, healthz_port = free_ports(2)
        ca = self.plane.pki / "ca.crt"
        config = kubelet_config(w, self.network, self.socket, ca, self.kubelet_port, healthz_port)
        (w / "kubelet.yaml").write_text(yaml.safe_dump(config))
        containerd = self.processes["containerd"].pid  # unshare and sh exec'd: the pid is containerd's
        self._spawn(
            "kubelet",
            self.network.inside(
                "nsenter",
                f"--mount=/proc/{containerd}/ns/mnt",
                "--",
                str(node_binary(self.binaries, "kubelet")),
                f"--config={w / 'kubelet.yaml'}",
                f"--kubeconfig={w / 'kubelet.kubeconfig'}",
                f"--root-dir={w / 'kubelet'}",
                f"--cert-dir={w / 'kubelet-pki'}",
                f"--hostname-override={self.name}",
                f"--node-ip={self.network.node_ip}",
                f"--node-labels={ZONE_LABEL}={self.zone}",
            ),
        )

    def _wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            self._check_alive()
            answer = kubectl_run(self.kubeconfig, "get", "node", self.name, "-o", "json", check=False)
            if answer.returncode == 0:
                node = json.loads(answer.stdout)
                conditions = {c["type"]: c["status"] for c in node["status"].get("conditions") or []}
                taints = [t["key"] for t in node["spec"].get("taints") or []]
                dns_answering = "answering on" in self.log("dns")  # once its lists are in
                if conditions.get("Ready") == "True" and not taints and dns_answering:
                    return
            if time.monotonic() > deadline:
                raise RuntimeError(f"node {self.name} not Ready after {timeout_s:g} s:\n{self.log('kubelet')[-4000:]}")
            time.sleep(0.5)

    # ------------------------------------------------------------------------------------------ failure

    def lose(self) -> None:
        """The node gone at once, as in a power cut: its network cut, then its kubelet, kube-proxy, DNS, containerd,
        shims and every container killed (SIGKILL), nothing told. What it leaves (its Node object, its pods as the
        API knows them) is the cluster's to deal with; :meth:`Cluster.replace` removes the rest."""
        self.network.cut()
        for proc in self.processes.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        remove_containers(self.runc_root)
        end_shims(self.socket)
        for name in list(self.processes):
            self._end(name)
        self.lost = True

    # ------------------------------------------------------------------------------------------------- stop

    def stop(self, pod_uids: Sequence[str] = ()) -> None:
        for name in ("kubelet", "kube-proxy", "dns", *(n for n in list(self.processes) if n != "containerd")):
            self._end(name)
        remove_containers(self.runc_root)
        self._end("containerd")
        end_shims(self.socket)
        unmount_under(self.workdir)
        self.network.delete()
        remove_pod_logs(list(pod_uids))
        shutil.rmtree(self.workdir, ignore_errors=True)
        unregister(self.network.netns)


@dataclass
class Cluster(_Processes):
    """The control plane, the fabric and the nodes (see the module docstring)."""

    binaries: Binaries
    workdir: Path
    fabric: Fabric = field(default_factory=Fabric.choose)
    pv_count: int = 12
    #: Directories a later session's reaper removes with the cluster when this run dies without stopping it.
    reap_also: tuple[Path, ...] = ()
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    plane: ControlPlane | None = None
    nodes: list[Node] = field(default_factory=list)
    #: The images every node imports: the sandbox's first.
    archives: tuple[Path, ...] = ()
    node_timeout_s: float = 180.0
    _started_nodes: int = 0

    @property
    def kubeconfig(self) -> Path:
        assert self.plane is not None
        return self.plane.kubeconfig

    @property
    def server(self) -> str:
        assert self.plane is not None
        return self.plane.server

    def kubectl(self, *args: str, input: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
        return kubectl_run(self.kubeconfig, *args, input=input, check=check)

    def start(self, archives: Sequence[Path], nodes: int = 1, timeout_s: float = 180.0) -> Cluster:
        """The fabric, the control plane, the scheduler, the volumes and ``nodes`` nodes with ``archives`` imported
        (the sandbox image's first)."""
        self.archives, self.node_timeout_s = tuple(archives), timeout_s
        cluster_dir = self.workdir / "cluster"
        cluster_dir.mkdir(parents=True, exist_ok=True)
        # Recorded first: a run killed before stop() leaves everything below to the next session's reap_stale().
        register(self.fabric.netns, self.fabric.host_if, cluster_dir, self.reap_also)
        start_guard(self.fabric.netns)
        self.fabric.create()
        self.plane = ControlPlane(
            self.binaries,
            cluster_dir / "plane",
            address=self.fabric.host_ip,
            controllers="*",
            controller_flags=(f"--node-monitor-grace-period={NODE_MONITOR_GRACE_S}s",),
        )
        self.plane.start()
        sign_certificate(self.plane.pki, "scheduler", "/CN=system:kube-scheduler")
        scheduler_config = cluster_dir / "scheduler.kubeconfig"
        scheduler_config.write_text(
            kubeconfig_text(
                self.plane.server,
                self.plane.pki / "ca.crt",
                cert=self.plane.pki / "scheduler.crt",
                key=self.plane.pki / "scheduler.key",
                user="scheduler",
            )
        )
        self._spawn(
            "kube-scheduler",
            [
                str(node_binary(self.binaries, "kube-scheduler")),
                f"--kubeconfig={scheduler_config}",
                f"--authentication-kubeconfig={scheduler_config}",
                f"--authorization-kubeconfig={scheduler_config}",
                "--bind-address=127.0.0.1",
                f"--secure-port={free_port()}",
                "--leader-elect=false",
            ],
        )
        self.grow(nodes)
        self._persistent_volumes()
        # Namespaces get their default ServiceAccount from the controller-manager a moment after it starts.
        deadline = time.monotonic() + timeout_s
        while self.kubectl("get", "serviceaccount", "default", "-n", "default", check=False).returncode != 0:
            if time.monotonic() > deadline:
                raise RuntimeError("no default ServiceAccount")
            time.sleep(0.5)
        return self

    def live_nodes(self) -> list[Node]:
        return [node for node in self.nodes if not node.lost]

    def grow(self, count: int) -> list[Node]:
        """At least ``count`` live nodes (new ones started, each in the next zone); the live nodes."""
        while len(self.live_nodes()) < count:
            self.add_node()
        return self.live_nodes()

    def add_node(self, zone: str | None = None) -> Node:
        """One more node on the fabric, Ready, every image imported, its pods routed to and from every other node."""
        assert self.plane is not None
        self._started_nodes += 1
        index = self._started_nodes
        network = NodeNetwork.choose(self.fabric, index, taken=[n.network.prefix for n in self.nodes])
        node = Node(
            self.binaries,
            self.workdir / f"node-{index}",
            self.plane,
            network,
            name="berth-node" if index == 1 else f"berth-node-{index}",
            zone=zone or ZONES[(index - 1) % len(ZONES)],
        )
        self.nodes.append(node)  # stopped at the end even when start() fails half-way
        node.start(self.archives[0], timeout_s=self.node_timeout_s)
        for other in self.nodes[:-1]:
            if not other.lost:
                other.network.route_to(network)
                network.route_to(other.network)
        for archive in self.archives[1:]:
            node.import_image(archive)
        return node

    def loopback_everywhere(self, source: Node, port: int) -> None:
        """A server listening on ``source``'s loopback at ``port`` (kfake listens on, and advertises, 127.0.0.1)
        reached at the same address on every other live node, as pods on the node's network (``hostNetwork``) see
        it: ``source`` relays its node address to its loopback, every other node its loopback to that address."""
        source.relay((source.network.node_ip, port), ("127.0.0.1", port))
        for node in self.live_nodes():
            if node is not source:
                node.relay(("127.0.0.1", port), (source.network.node_ip, port))

    def node(self, name: str) -> Node:
        return next(node for node in self.nodes if node.name == name)

    def node_of(self, pod: dict[str, Any]) -> Node:
        """The node a pod (as the API gives it) was scheduled to."""
        return self.node(pod["spec"]["nodeName"])

    def replace(self, lost: Node) -> Node:
        """What is left of a lost node removed (its Node object too, which lets Kubernetes delete its pods), and a
        fresh node started in its zone."""
        lost.stop(self._pod_uids(lost.name))
        self.kubectl("delete", "node", lost.name, "--wait=true", check=False)
        self.nodes.remove(lost)
        return self.add_node(zone=lost.zone)

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
                    "metadata": {"name": f"berth-node-pv-{index}", "labels": {"berth.dev/node-volume": "true"}},
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
        self.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(volumes))

    def _pod_uids(self, node_name: str | None = None) -> list[str]:
        if self.plane is None or not self.live_nodes():
            return []
        selector = [f"--field-selector=spec.nodeName={node_name}"] if node_name else []
        answer = self.kubectl("get", "pods", "-A", *selector, "-o", "jsonpath={.items[*].metadata.uid}", check=False)
        return answer.stdout.split() if answer.returncode == 0 else []

    def stop(self) -> None:
        pod_uids = self._pod_uids()
        for node in self.nodes:
            node.stop(pod_uids)
        self._end("kube-scheduler")
        if self.plane is not None:
            self.plane.stop()
        unmount_under(self.workdir)
        self.fabric.delete()
        shutil.rmtree(self.workdir / "cluster", ignore_errors=True)
        shutil.rmtree(self.workdir / "volumes", ignore_errors=True)
        unregister(self.fabric.netns)
