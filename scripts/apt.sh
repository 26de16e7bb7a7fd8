#!/usr/bin/env bash
# Install Debian packages for the project's set-up scripts: `scripts/apt.sh PACKAGE...`.
# Every apt step waits for the dpkg and list locks (another apt run on the machine, unattended upgrades) instead of
# failing on them; the package lists are refreshed once per hour at most. Root, or sudo.
set -euo pipefail
[ "$#" -gt 0 ] || { echo "usage: scripts/apt.sh PACKAGE..." >&2; exit 2; }
command -v apt-get >/dev/null 2>&1 || { echo "no apt-get: install $* yourself" >&2; exit 1; }
sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
wait_lock=(-o DPkg::Lock::Timeout=900)
stamp=/var/lib/apt/periodic/update-success-stamp
lists=/var/lib/apt/lists
fresh() { [ -n "$(find "$stamp" "$lists/partial" -maxdepth 0 -mmin -60 2>/dev/null | head -n1)" ] && \
  [ -n "$(ls "$lists" | grep -v -e '^lock$' -e '^partial$' -e '^auxfiles$' | head -n1)" ]; }
if ! fresh; then
  # apt-get update takes the lists lock: wait for it as for the dpkg lock (up to 15 minutes).
  for _ in $(seq 1 90); do
    if $sudo apt-get "${wait_lock[@]}" update -qq; then $sudo mkdir -p "$(dirname "$stamp")"; $sudo touch "$stamp"; break; fi
    echo "apt-get update failed (another apt run holding the lists?); retrying in 10 s" >&2
    sleep 10
  done
fi
DEBIAN_FRONTEND=noninteractive $sudo apt-get "${wait_lock[@]}" install -y -qq --no-install-recommends "$@" >/dev/null
