#!/usr/bin/env bash
# Create the coordinator's tokens Secret for the plain manifests in deploy/manifests/. (The Helm chart generates
# it; the plain manifests cannot, because a token committed in a YAML file would be the same for everyone.)
#
# Usage: deploy/create-tokens-secret.sh [NAMESPACE] [NAME=GLOB[,GLOB...] ...]
#
#   deploy/create-tokens-secret.sh berth                              # the admin token only
#   deploy/create-tokens-secret.sh berth 'orders=orders,orders-*'     # plus a token for the orders groups
#
# The Secret "berth-coordinator-tokens" gets the keys the manifests mount: "admin-token" (the operator's token,
# named "admin"), "analytics-token" (the analytics job's, named "analytics", with the scope journal:read only),
# "token-NAME" per NAME=GLOBS argument (named NAME), and "tokens.yaml" (the coordinator's --tokens-file listing all
# of them; the names are what the coordinator's logs and journal call each token). Tokens are 64 hex characters (256 random bits); only DRY_RUN=1 prints
# them (base64-encoded, as the Secret).
#
# Environment: KUBECTL (default: kubectl); SECRET_NAME (default: berth-coordinator-tokens);
# DRY_RUN=1 prints the Secret as YAML instead of creating it (for review, or `| kubectl apply -f -`).
set -euo pipefail

namespace="${1:-berth}"
if [[ $# -gt 0 ]]; then shift; fi
kubectl="${KUBECTL:-kubectl}"
secret="${SECRET_NAME:-berth-coordinator-tokens}"

# Files, not --from-literal: a token on a command line is visible to every user of the machine (ps, /proc).
umask 077
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

new_token() { od -An -tx1 -N32 /dev/urandom | tr -d ' \n'; }

new_token > "$work/admin-token"
new_token > "$work/analytics-token"
entries="{\"name\": \"admin\", \"token\": \"$(cat "$work/admin-token")\", \"groups\": [\"*\"], \"admin\": true}"
entries="$entries, {\"name\": \"analytics\", \"token\": \"$(cat "$work/analytics-token")\", \"groups\": [], \"admin\": false, \"scopes\": [\"journal:read\"]}"
from_files=(--from-file="admin-token=$work/admin-token" --from-file="analytics-token=$work/analytics-token")

for spec in "$@"; do
  name="${spec%%=*}"
  globs="${spec#*=}"
  if [[ "$spec" != *=* || -z "$globs" || ! "$name" =~ ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$ ]]; then
    echo "create-tokens-secret.sh: expected NAME=GLOB[,GLOB...] with a lower-case DNS-label NAME, got '$spec'" >&2
    exit 2
  fi
  new_token > "$work/token-$name"
  groups_json="$(printf '%s' "$globs" | sed 's/\\/\\\\/g; s/"/\\"/g; s/,/", "/g')"
  entries="$entries, {\"name\": \"$name\", \"token\": \"$(cat "$work/token-$name")\", \"groups\": [\"$groups_json\"], \"admin\": false}"
  from_files+=(--from-file="token-$name=$work/token-$name")
done

# JSON is valid YAML; the coordinator reads either.
printf '{"tokens": [%s]}\n' "$entries" > "$work/tokens.yaml"
from_files+=(--from-file="tokens.yaml=$work/tokens.yaml")

if [[ "${DRY_RUN:-}" == "1" ]]; then
  "$kubectl" create secret generic "$secret" --namespace "$namespace" "${from_files[@]}" --dry-run=client -o yaml
else
  "$kubectl" create secret generic "$secret" --namespace "$namespace" "${from_files[@]}"
  echo "created secret/$secret in namespace $namespace; the coordinator starts once it is there" >&2
fi
