#!/usr/bin/env bash
# Create the coordinator's TLS Secret for the plain manifests in deploy/manifests/. (The Helm chart generates it;
# the plain manifests cannot, because a private key committed in a YAML file would be everyone's.)
#
# Usage: deploy/create-tls-secret.sh [NAMESPACE] [SERVICE]
#
#   deploy/create-tls-secret.sh berth                       # CA and certificate for berth-coordinator.berth
#
# Makes a CA (self-signed, EC P-256, 10 years) and a server certificate it signs for the names clients use —
# SERVICE (default berth-coordinator), SERVICE.NAMESPACE, SERVICE.NAMESPACE.svc and
# SERVICE.NAMESPACE.svc.$CLUSTER_DOMAIN — and creates the kubernetes.io/tls Secret "berth-coordinator-tls" with
# tls.crt, tls.key and ca.crt (what the operator, the analytics job and the fleets' pods verify against). The CA's key
# is not kept: to rotate, delete the Secret and run the script again (the operator publishes the new CA to fleets).
#
# Environment: KUBECTL (default: kubectl); OPENSSL (default: openssl); SECRET_NAME (default: berth-coordinator-tls);
# CLUSTER_DOMAIN (default: cluster.local); DRY_RUN=1 prints the Secret as YAML instead of creating it.
set -euo pipefail

namespace="${1:-berth}"
service="${2:-berth-coordinator}"
kubectl="${KUBECTL:-kubectl}"
openssl="${OPENSSL:-openssl}"
secret="${SECRET_NAME:-berth-coordinator-tls}"
domain="${CLUSTER_DOMAIN:-cluster.local}"

if [[ ! "$namespace" =~ ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$ || ! "$service" =~ ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$ ]]; then
  echo "create-tls-secret.sh: NAMESPACE and SERVICE must be DNS labels, got '$namespace' '$service'" >&2
  exit 2
fi

umask 077
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

"$openssl" req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:P-256 -days 3650 \
  -subj "/CN=$service coordinator CA" -keyout "$work/ca.key" -out "$work/ca.crt" 2>/dev/null
"$openssl" req -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:P-256 \
  -subj "/CN=$service.$namespace.svc" -keyout "$work/tls.key" -out "$work/tls.csr" 2>/dev/null
printf 'subjectAltName=DNS:%s,DNS:%s.%s,DNS:%s.%s.svc,DNS:%s.%s.svc.%s\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n' \
  "$service" "$service" "$namespace" "$service" "$namespace" "$service" "$namespace" "$domain" > "$work/ext"
"$openssl" x509 -req -in "$work/tls.csr" -CA "$work/ca.crt" -CAkey "$work/ca.key" -CAcreateserial -days 3650 \
  -extfile "$work/ext" -out "$work/tls.crt" 2>/dev/null

from_files=(--from-file="tls.crt=$work/tls.crt" --from-file="tls.key=$work/tls.key" --from-file="ca.crt=$work/ca.crt")
if [[ "${DRY_RUN:-}" == "1" ]]; then
  "$kubectl" create secret generic "$secret" --type=kubernetes.io/tls --namespace "$namespace" "${from_files[@]}" \
    --dry-run=client -o yaml
else
  "$kubectl" create secret generic "$secret" --type=kubernetes.io/tls --namespace "$namespace" "${from_files[@]}"
  echo "created secret/$secret in namespace $namespace for $service.$namespace" >&2
fi
