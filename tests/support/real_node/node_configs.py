"""The node's configuration files, as pure functions of its directory, network and identities.

- :func:`cni_conflist`: the pod network (CNI ``bridge`` on the node's bridge, ``host-local`` addresses on the pods'
  /25 with their state under the work directory, ``portmap``); no masquerading: nothing leaves the namespace.
- :func:`containerd_toml`: containerd with root, state, socket and ``/opt`` under the work directory, the CRI plugin's
  sandbox image (``localhost/berth-node-pause:1``), pod network namespaces mounted under its state directory, runc
  through ``runc-oom-clamp`` with a state root of its own (so the node's containers can be found and ended), the CNI
  configuration above.
- :func:`kubelet_config`: the KubeletConfiguration (cgroupfs, no QoS cgroups or eviction, the node's address for
  its API and as the pods' nameserver, no upstream resolver, anonymous access for the apiserver's logs/exec calls).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from support.node_network import NodeNetwork

CLUSTER_DOMAIN = "cluster.local"
PAUSE_IMAGE = "localhost/berth-node-pause:1"


def cni_conflist(workdir: Path, network: NodeNetwork) -> dict[str, Any]:
    return {
        "cniVersion": "1.0.0",
        "name": f"berth-node-{network.suffix}",
        "plugins": [
            {
                "type": "bridge",
                "bridge": network.bridge,
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "dataDir": str(workdir / "cni-ipam"),
                    "ranges": [[{"subnet": network.pod_cidr, "gateway": network.gateway}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }


def containerd_toml(workdir: Path, socket: Path, runc_root: Path, clamp: Path, cni_bin: Path) -> str:
    w = workdir
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    return f"""version = 2
root = "{w / "containerd" / "root"}"
state = "{w / "containerd" / "state"}"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "{socket}"
[ttrpc]
  address = "{socket}.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "{w / "containerd" / "opt"}"
[{cri}]
  sandbox_image = "{PAUSE_IMAGE}"
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
  BinaryName = "{clamp}"
  Root = "{runc_root}"
  SystemdCgroup = false
[{cri}.cni]
  bin_dir = "{cni_bin}"
  conf_dir = "{w / "cni"}"
"""


def kubelet_config(
    workdir: Path, network: NodeNetwork, socket: Path, ca: Path, port: int, healthz_port: int
) -> dict[str, Any]:
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "authentication": {
            # The apiserver calls the kubelet (logs, exec) without a client certificate here; only this machine
            # and the node's namespace reach the kubelet's address.
            "anonymous": {"enabled": True},
            "webhook": {"enabled": False},
            "x509": {"clientCAFile": str(ca)},
        },
        "authorization": {"mode": "AlwaysAllow"},
        "cgroupDriver": "cgroupfs",
        "containerRuntimeEndpoint": f"unix://{socket}",
        "failSwapOn": False,
        "address": network.node_ip,
        "port": port,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": healthz_port,
        "readOnlyPort": 0,
        "cgroupsPerQOS": False,
        "enforceNodeAllocatable": [],
        "evictionHard": {"memory.available": "50Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "localStorageCapacityIsolation": False,
        "clusterDNS": [network.node_ip],
        "clusterDomain": CLUSTER_DOMAIN,
        "resolvConf": str(workdir / "resolv.conf"),  # empty: pods resolve cluster names only
        "volumePluginDir": str(workdir / "kubelet-plugins"),
        "serializeImagePulls": False,
        "maxPods": 60,
    }
