#!/usr/bin/env bash
# Make sure the node tier's packages are installed (tests/node: a real kubelet running pods from images built from
# the Dockerfile): containerd, runc and the CNI plugins (the container runtime and pod network), buildah (builds the
# images), debootstrap (the base image from Debian packages), busybox-static (the pod sandbox "pause" image),
# iptables (kube-proxy and the pod network), iproute2 (the node's network namespace). The kubelet, kube-scheduler
# and kube-proxy come from ../shared/tools/k8s/bin, as the control plane's binaries do.
# containerd is never started as a service: the tests run their own, with a private config and socket.
set -euo pipefail
need=()
have() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ] || [ -x "/sbin/$1" ]; }
have containerd || need+=(containerd)
have runc || need+=(runc)
[ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
have buildah || need+=(buildah)
have debootstrap || need+=(debootstrap)
dpkg -s busybox-static >/dev/null 2>&1 || need+=(busybox-static)
have iptables || need+=(iptables)
have ip || need+=(iproute2)
have conntrack || need+=(conntrack)
[ "${#need[@]}" -eq 0 ] && exit 0
echo "installing the node tier's packages with apt-get: ${need[*]} ..."
"$(dirname "$0")/apt.sh" "${need[@]}"
# The Debian package enables containerd's service: the tests start their own, so stop and disable it.
if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
  systemctl disable --now containerd >/dev/null 2>&1 || true
fi
containerd --version
