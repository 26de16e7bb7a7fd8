#!/usr/bin/env bash
# Make sure promtool is on PATH: tests check the alert rules (promtool check rules / promtool test rules). Installs
# Debian's prometheus package (which ships promtool) with apt when it is missing; nothing is started.
set -euo pipefail
if command -v promtool >/dev/null 2>&1; then exit 0; fi
if command -v apt-get >/dev/null 2>&1; then
  echo "installing promtool (Debian's prometheus package) with apt-get ..."
  "$(dirname "$0")/apt.sh" prometheus
  command -v systemctl >/dev/null 2>&1 && systemctl disable --now prometheus >/dev/null 2>&1 || true
  promtool --version 2>&1 | head -n1
  exit 0
fi
echo "no promtool and no apt-get: install Prometheus' promtool and put it on PATH (the alert rules' tests use it)" >&2
exit 1
