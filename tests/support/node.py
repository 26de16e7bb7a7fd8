"""A real Kubernetes node on this machine, in a network namespace of its own: pods that run images.

``Node.start()`` builds, in this order (every name carries a per-run suffix, so runs coexist on one machine):

- **the network**: namespace ``berth-node-<pid>-<hex>`` joined to this machine by a veth pair (host end
  ``10.A.B.249/30``, node end ``10.A.B.250/30``, the node's InternalIP), a /25 of the same /24 for pods on a bridge
  inside the namespace, and the Service range routed onto that bridge; nothing is routed out of the
  namespace (it has no default route) and this machine routes only the pods' /25 into it.
- **its control plane**: a ``ControlPlane`` of its own serving on the host end of the link, so the kubelet, the
  pods (through the ``kubernetes`` Service, whose endpoints the apiserver keeps) and ``kubectl`` on this machine all
  reach it. (The control-plane tier's plane has no scheduler and its fake kubelet binds pods itself; a scheduler
  there would race it for every pod, so the node tier does not share it.)
- **containerd** (private config, root, state and socket under the work directory; runc through
  ``../shared/tools/k8s/node/runc-oom-clamp``, with its own state root; the CNI bridge; pod network namespaces
  mounted under containerd's state directory), **kubelet** and **kube-proxy** (iptables mode) inside the network
  namespace, **kube-scheduler** beside the apiserver, and **cluster DNS**: ``support.node_dns``, a small responder
  for ``<service>.<namespace>.svc.cluster.local`` (and StatefulSet pods' names under their governing Service)
  from the apiserver, on the node's address, which the kubelet gives pods as their nameserver. There is no upstream
  resolver: only cluster names resolve.
- **storage**: ``PersistentVolume``s of the empty storage class on directories of the work directory, which claims
  with no class (the chart's, a stateful fleet's) bind to.

Processes in the namespace are started with ``nsenter --net`` (not ``ip netns exec``, which would give them a mount
namespace of their own: the kubelet's volume mounts must be the ones containerd sees). ``stop()`` ends every process
it started by PID (containers first, through runc's state root), unmounts what the node mounted under its work
directory, deletes the namespace and the work directory.

Binaries: ``kubelet``, ``kube-proxy`` and ``kube-scheduler`` beside the control plane's (``support.kube_cluster``),
containerd, runc, the CNI plugins, iptables and nsenter from Debian (``scripts/ensure-node.sh``, from
``make install``).
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import random
import secrets
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from support.kube_cluster import REPO, Binaries, ControlPlane, kubeconfig_text, sign_certificate, stop_process
from support.net import free_port

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
SERVICE_RANGE = "10.0.0.0/24"
CLUSTER_DOMAIN = "cluster.local"


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


def _run(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(list(argv), capture_output=True, text=True, check=False)
    if check and result.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {result.returncode}: {result.stderr.strip()}")
    return result


def _used_networks() -> list[ipaddress.IPv4Network]:
    """Every IPv4 network this machine already has an address or a route in (all tables)."""
    found = []
    for line in (
        _run("ip", "-4", "-o", "addr").stdout.splitlines()
        + _run("ip", "-4", "route", "show", "table", "all").stdout.splitlines()
    ):
        for word in line.split():
            with contextlib.suppress(ValueError):
                if "/" in word or word[:1].isdigit():
                    found.append(ipaddress.ip_network(word, strict=False))
    return [n for n in found if n.prefixlen > 0]


@dataclass(frozen=True)
class NodeNetwork:
    """Names and addresses of one node's network (see the module docstring)."""

    suffix: str
    prefix: str  # "10.A.B"

    @classmethod
    def choose(cls) -> NodeNetwork:
        used = _used_networks()
        rng = random.SystemRandom()
        for _ in range(200):
            prefix = f"10.{rng.randrange(100, 200)}.{rng.randrange(0, 256)}"
            candidate = ipaddress.ip_network(f"{prefix}.0/24")
            if not any(candidate.overlaps(n) for n in used):
                return cls(f"{os.getpid() % 100000}{secrets.token_hex(2)}", prefix)
        raise RuntimeError("no free /24 in 10.100.0.0-10.199.255.0 for the node's network")

    @property
    def netns(self) -> str:
        return f"berth-node-{self.suffix}"

    def _if(self, kind: str) -> str:  # at most 15 characters
        return f"bn{self.suffix[-9:]}{kind}"

    @property
    def host_if(self) -> str:
        return self._if("h")

    @property
    def node_if(self) -> str:
        return self._if("n")

    @property
    def bridge(self) -> str:
        return self._if("b")

    @property
    def host_ip(self) -> str:
        return f"{self.prefix}.249"

    @property
    def node_ip(self) -> str:
        return f"{self.prefix}.250"

    @property
    def pod_cidr(self) -> str:
        return f"{self.prefix}.0/25"

    @property
    def gateway(self) -> str:
        return f"{self.prefix}.1"

    def inside(self, *argv: str) -> list[str]:
        """``argv`` run in the node's network namespace (and this machine's mount namespace)."""
        return ["nsenter", f"--net=/var/run/netns/{self.netns}", "--", *argv]

    def create(self) -> None:
        ns = self.netns
        _run("ip", "netns", "add", ns)
        _run("ip", "link", "add", self.host_if, "type", "veth", "peer", "name", self.node_if, "netns", ns)
        _run("ip", "addr", "add", f"{self.host_ip}/30", "dev", self.host_if)
        _run("ip", "link", "set", self.host_if, "up")
        # This machine reaches the pods (tests, the apiserver's probes of nothing, kubectl port-forward's peer).
        _run("ip", "route", "add", self.pod_cidr, "via", self.node_ip, "src", self.host_ip)
        for argv in (
            ("ip", "link", "set", "lo", "up"),
            ("ip", "addr", "add", f"{self.node_ip}/30", "dev", self.node_if),
            ("ip", "link", "set", self.node_if, "up"),
            # The pods' bridge, made here (the CNI plugin takes it as it finds it) so that ClusterIPs can be routed
            # to it: kube-proxy's rules rewrite the ones it knows, the rest go unanswered on the bridge.
            ("ip", "link", "add", self.bridge, "type", "bridge"),
            ("ip", "addr", "add", f"{self.gateway}/25", "dev", self.bridge),
            ("ip", "link", "set", self.bridge, "up"),
            ("ip", "route", "add", SERVICE_RANGE, "dev", self.bridge),
            ("sysctl", "-qw", "net.ipv4.ip_forward=1"),
        ):
            _run(*self.inside(*argv))
        # Pod-to-Service-to-pod on one bridge: the replies must pass the namespace's iptables to be un-NATed.
        with contextlib.suppress(RuntimeError):
            _run(*self.inside("sysctl", "-qw", "net.bridge.bridge-nf-call-iptables=1"))

    def delete(self) -> None:
        _run("ip", "netns", "delete", self.netns, check=False)  # takes the veth pair, the bridge and the routes along
        _run("ip", "link", "delete", self.host_if, check=False)


@dataclass
class Node:
    """One node (see the module docstring): ``start()``, then ``kubeconfig``/``server`` for clients, ``stop()``."""

    binaries: Binaries
    workdir: Path
    name: str = "berth-node"
    network: NodeNetwork = field(default_factory=NodeNetwork.choose)
    pv_count: int = 8
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
        env = {**os.environ, "PYTHONPATH": str(REPO / "tests")}
        self.processes[name] = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env
        )

    def _check_alive(self) -> None:
        for name, proc in self.processes.items():
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {proc.returncode}:\n{self.log(name)[-4000:]}")

    # ------------------------------------------------------------------------------------------------ start

    def start(self, pause_archive: Path, timeout_s: float = 180.0) -> Node:
        self.workdir.mkdir(parents=True, exist_ok=True)
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
        (w / "cni" / "10-berth-node.conflist").write_text(
            json.dumps(
                {
                    "cniVersion": "1.0.0",
                    "name": f"berth-node-{self.network.suffix}",
                    "plugins": [
                        {
                            "type": "bridge",
                            "bridge": self.network.bridge,
                            "isGateway": True,
                            "ipMasq": False,
                            "hairpinMode": True,
                            "ipam": {
                                "type": "host-local",
                                "dataDir": str(w / "cni-ipam"),
                                "ranges": [[{"subnet": self.network.pod_cidr, "gateway": self.network.gateway}]],
                                "routes": [{"dst": "0.0.0.0/0"}],
                            },
                        },
                        {"type": "portmap", "capabilities": {"portMappings": True}},
                    ],
                }
            )
        )
        cri = 'plugins."io.containerd.grpc.v1.cri"'
        config = f"""version = 2
root = "{w / "containerd" / "root"}"
state = "{w / "containerd" / "state"}"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "{self.socket}"
[ttrpc]
  address = "{self.socket}.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "{w / "containerd" / "opt"}"
[{cri}]
  sandbox_image = "localhost/berth-node-pause:1"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  netns_mounts_under_state_dir = true
  disable_apparmor = true
  enable_selinux = false
[{cri}.containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"
[{cri}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[{cri}.containerd.runtimes.runc.options]
  BinaryName = "{CLAMP}"
  Root = "{self.runc_root}"
  SystemdCgroup = false
[{cri}.cni]
  bin_dir = "{CNI_BIN}"
  conf_dir = "{w / "cni"}"
"""
        (w / "containerd.toml").write_text(config)
        containerd = _which("containerd")
        assert containerd is not None
        self._spawn("containerd", self.network.inside(containerd, "--config", str(w / "containerd.toml")))
        deadline = time.monotonic() + 60
        while _run("ctr", "--address", str(self.socket), "version", check=False).returncode != 0:
            self._check_alive()
            if time.monotonic() > deadline:
                raise RuntimeError(f"containerd did not answer within 60 s:\n{self.log('containerd')[-3000:]}")
            time.sleep(0.2)

    def import_image(self, archive: Path) -> None:
        """An OCI archive into the node's image store (containerd's ``k8s.io`` namespace, where the kubelet looks)."""
        _run("ctr", "--address", str(self.socket), "-n", "k8s.io", "images", "import", str(archive))

    def images(self) -> list[str]:
        out = _run("ctr", "--address", str(self.socket), "-n", "k8s.io", "images", "ls", "-q").stdout
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
        env = {**os.environ, "PYTHONPATH": str(REPO / "tests")}
        return subprocess.run(self.network.inside(*argv), capture_output=True, text=True, env=env, check=True)

    def kill_container(self, container_id: str) -> None:
        """SIGKILL a container's process in place, as a crash would (the kubelet restarts it in the same pod)."""
        _run("ctr", "--address", str(self.socket), "-n", "k8s.io", "tasks", "kill", "--signal", "SIGKILL", container_id)

    def _start_kubelet(self) -> None:
        assert self.plane is not None
        w = self.workdir
        (w / "resolv.conf").write_text("")  # no upstream: pods resolve cluster names only
        self.kubelet_port = free_port()
        config = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "authentication": {
                # The apiserver calls the kubelet (logs, exec) without a client certificate here; only this machine
                # and the node's namespace reach the kubelet's address.
                "anonymous": {"enabled": True},
                "webhook": {"enabled": False},
                "x509": {"clientCAFile": str(self.plane.pki / "ca.crt")},
            },
            "authorization": {"mode": "AlwaysAllow"},
            "cgroupDriver": "cgroupfs",
            "containerRuntimeEndpoint": f"unix://{self.socket}",
            "failSwapOn": False,
            "address": self.network.node_ip,
            "port": self.kubelet_port,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": free_port(),
            "readOnlyPort": 0,
            "cgroupsPerQOS": False,
            "enforceNodeAllocatable": [],
            "evictionHard": {"memory.available": "50Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "localStorageCapacityIsolation": False,
            "clusterDNS": [self.network.node_ip],
            "clusterDomain": CLUSTER_DOMAIN,
            "resolvConf": str(w / "resolv.conf"),
            "volumePluginDir": str(w / "kubelet-plugins"),
            "serializeImagePulls": False,
            "maxPods": 60,
        }
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
                if conditions.get("Ready") == "True" and not taints:
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
                        "capacity": {"storage": "5Gi"},
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
        self._remove_containers()
        self._end("containerd")
        self._end_shims()
        if self.plane is not None:
            self.plane.stop()
        self._unmount_all()
        self.network.delete()
        self._remove_pod_logs(pod_uids)
        shutil.rmtree(self.workdir, ignore_errors=True)

    def _end(self, name: str) -> None:
        stop_process(self.processes.pop(name, None), timeout_s=15)

    def _pod_uids(self) -> list[str]:
        if self.plane is None or "kubelet" not in self.processes:
            return []
        answer = self._kubectl("get", "pods", "-A", "-o", "jsonpath={.items[*].metadata.uid}", check=False)
        return answer.stdout.split() if answer.returncode == 0 else []

    def _remove_containers(self) -> None:
        """Every container of this node, through runc's state root (the shims would keep them running)."""
        if not self.runc_root.is_dir():
            return
        listed = _run(str(RUNC), "--root", str(self.runc_root), "list", "-q", check=False).stdout.split()
        for container in listed:
            _run(str(RUNC), "--root", str(self.runc_root), "delete", "--force", container, check=False)

    def _end_shims(self) -> None:
        """The containerd shims this node's containerd started (they outlive it): found by its socket address."""
        marker = str(self.socket).encode()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if argv and b"containerd-shim" in argv[0] and marker in argv:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(entry.name), signal.SIGKILL)

    def _unmount_all(self) -> None:
        prefix = str(self.workdir) + "/"
        mounts = []
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            point = line.split()[4].replace("\\040", " ")
            if point.startswith(prefix):
                mounts.append(point)
        for point in sorted(set(mounts), key=len, reverse=True):
            _run("umount", "-l", point, check=False)

    def _remove_pod_logs(self, uids: list[str]) -> None:
        """The kubelet keeps pod logs under /var/log/pods (not configurable in 1.28): remove this node's."""
        pods = Path("/var/log/pods")
        for uid in uids:
            for directory in pods.glob(f"*_{uid}"):
                shutil.rmtree(directory, ignore_errors=True)
        containers = Path("/var/log/containers")
        if containers.is_dir():
            for link in containers.iterdir():
                if link.is_symlink() and not link.exists() and any(uid in os.readlink(link) for uid in uids):
                    link.unlink()
