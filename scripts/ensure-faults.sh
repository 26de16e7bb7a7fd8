#!/usr/bin/env bash
# Make sure the robustness runs' fault tools are here (tests/robustness, make robustness): iproute2 and iptables for
# the network namespaces and their faults, tc (iproute2) for rate limits, e2fsprogs and util-linux for the loop-mounted
# disks (mkfs.ext4, fsfreeze), and libfaketime (Debian's faketime) for a replica started with a skewed wall clock.
# Installs what is missing with apt; nothing is started.
set -euo pipefail
missing=()
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
command -v iptables >/dev/null 2>&1 || missing+=(iptables)
command -v mkfs.ext4 >/dev/null 2>&1 || missing+=(e2fsprogs)
command -v fsfreeze >/dev/null 2>&1 || missing+=(util-linux)
ls /usr/lib/*/faketime/libfaketime.so.1 >/dev/null 2>&1 || missing+=(faketime)
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
if command -v apt-get >/dev/null 2>&1; then
  echo "installing the robustness runs' fault tools with apt-get: ${missing[*]} ..."
  "$(dirname "$0")/apt.sh" "${missing[@]}"
  exit 0
fi
echo "missing ${missing[*]} and no apt-get: the robustness runs need them (tests/robustness)" >&2
exit 1
