#!/usr/bin/env bash
# Make sure etcd is on PATH for the real control-plane test tier (tests/kube); install Debian's etcd-server with
# apt when it is missing. kube-apiserver and kube-controller-manager come from ../shared/tools/k8s/bin (or
# KUBEBUILDER_ASSETS / BERTH_K8S_BIN_DIR), see tests/support/kube_cluster.py.
set -euo pipefail
for dir in "${KUBEBUILDER_ASSETS:-}" "${BERTH_K8S_BIN_DIR:-}"; do
  if [ -n "$dir" ] && [ -x "$dir/etcd" ]; then exit 0; fi
done
if command -v etcd >/dev/null 2>&1; then exit 0; fi
if command -v apt-get >/dev/null 2>&1; then
  echo "installing etcd (Debian's etcd-server) with apt-get ..."
  "$(dirname "$0")/apt.sh" etcd-server
  # The package's service is not wanted: tests start their own etcd on a free loopback port.
  command -v systemctl >/dev/null 2>&1 && systemctl disable --now etcd >/dev/null 2>&1 || true
  etcd --version | head -n1
  exit 0
fi
echo "no etcd and no apt-get: install etcd 3.4+ and put it on PATH (needed by the control-plane tests)" >&2
exit 1
