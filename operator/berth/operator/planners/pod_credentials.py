"""Kafka credentials as files in a fleet's pods: mounted so the container's user can read them, and a pod that
fails on them named with the reason.

Rules:

- The client certificate's Secret volume (``planners.kafka_pods``) gets a mode the container's user can read
  without changing the fleet's ``securityContext``: with a pod ``fsGroup`` (which the kubelet makes the group of
  every file of the volume, and a supplementary group of every container) ``0440``, read by the owner and that
  group only; without one ``0444``, since the files belong to root and the container's user is whatever the
  template or the image says (Kubernetes' own default for Secret volumes is ``0644``; the volume is private to the
  pod and read-only). The operator never adds an ``fsGroup``: it would re-own every other volume of the pod too
  (the fleet's data claims).
- Every container of a Kafka fleet keeps the tail of its log as its termination message when it fails
  (``terminationMessagePolicy: FallbackToLogsOnError``) unless the template chose a policy: that is where the
  kubelet says why a consumer exited, in the pod's status, without the operator reading logs.
- :func:`credentials_failing` recognises, in those messages (``crashes``: pod → the message of its last failed
  container), the errors Kafka clients give when they cannot use their credentials (a certificate or key file they
  cannot read or parse, a refused TLS handshake or SASL authentication) and says which pods and why: the Ready
  reason ``CredentialsUnusable`` and a Warning Event when Ready's reason becomes it (``contributors.workload``). The
  reason quoted is the client's own line, cut to :data:`REASON_CHARS`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from berth.operator.planners.status import PodsBlocked
from berth.operator.spec.fleet import Fleet

CREDENTIALS_UNUSABLE = "CredentialsUnusable"
#: The most characters of a client's error line quoted in the condition and the Event.
REASON_CHARS = 240
#: The most pods named (the rest counted).
PODS_NAMED = 5
MODE_WITH_FS_GROUP = 0o440
MODE_WITHOUT_FS_GROUP = 0o444
FAILURE_POLICY = "FallbackToLogsOnError"

#: What Kafka clients say when their credentials cannot be used, lower-cased: librdkafka (confluent-kafka and every
#: client on it), the Java client, kafka-python and Python's ssl module.
CREDENTIAL_ERRORS = (
    "ssl.certificate.location failed",
    "ssl.key.location failed",
    "ssl.ca.location failed",
    "ssl.keystore.location failed",
    "ssl.truststore.location failed",
    "failed to load private key",
    "private key check failed",
    "sasl authentication error",
    "sasl authentication failed",
    "authentication failed",
    "sslhandshakeexception",
    "ssl handshake failed",
    "certificate verify failed",
    "/etc/berth/kafka/",
)


def secret_mode(template: Mapping[str, Any]) -> int:
    """The mode of the client certificate's files in a pod of ``template`` (see the module rules)."""
    security = (template.get("spec") or {}).get("securityContext") or {}
    return MODE_WITH_FS_GROUP if security.get("fsGroup") is not None else MODE_WITHOUT_FS_GROUP


def with_failure_messages(template: dict[str, Any]) -> dict[str, Any]:
    """``template`` with every container keeping its log's tail as its termination message when it fails, unless
    the container says otherwise."""
    pod_spec = template["spec"]
    for kind in ("initContainers", "containers"):
        for container in pod_spec.get(kind) or []:
            container.setdefault("terminationMessagePolicy", FAILURE_POLICY)
    return template


def credential_error(message: str) -> str | None:
    """The line of a termination message that says a credential could not be used, cut short; None if none."""
    for line in reversed(message.splitlines()):
        lowered = line.lower()
        if any(error in lowered for error in CREDENTIAL_ERRORS):
            said = " ".join(line.split())
            return said if len(said) <= REASON_CHARS else said[: REASON_CHARS - 1] + "…"
    return None


def credentials_failing(fleet: Fleet, crashes: Mapping[str, str]) -> PodsBlocked | None:
    """Why pods of a Kafka fleet exit on their credentials (``crashes``: pod → its last failed container's
    termination message), or None when none does."""
    if fleet.spec.coordinator.kafka is None:
        return None
    failing = {pod: error for pod, message in sorted(crashes.items()) if (error := credential_error(message))}
    if not failing:
        return None
    pods = list(failing)
    named = ", ".join(pods[:PODS_NAMED]) + (f" and {len(pods) - PODS_NAMED} more" if len(pods) > PODS_NAMED else "")
    first = failing[pods[0]]
    return PodsBlocked(
        CREDENTIALS_UNUSABLE,
        f"pod{'s' if len(pods) > 1 else ''} {named} exit{'' if len(pods) > 1 else 's'} on the Kafka credentials"
        f" mounted from spec.coordinator.kafka: {first}",
    )
