"""Plan the Kubernetes objects a ConsumerFleet owns: its StatefulSet, headless Service and PodDisruptionBudget.

Owns ``plan_statefulset`` and the names the resource pins down (docs/architecture.md "The ConsumerFleet
resource"). Rules:

- Both objects are named like the fleet, live in its namespace and carry a controller ownerReference to it
  (``blockOwnerDeletion``), so Kubernetes garbage-collects them with the fleet.
- Pods carry ``app.kubernetes.io/name``, ``app.kubernetes.io/instance`` and ``berth.dev/fleet``; the same three
  are the selector (and ``status.selector``). They override a template's own values for those keys, because a
  pod the selector does not match would be orphaned by its own StatefulSet.
- Every container, init containers included, gets the BERTH_* environment (below). Init containers too because
  native sidecars (``restartPolicy: Always``) are init containers that may well be the consumer, and a plain init
  container that waits for the coordinator needs its URL; an unused variable costs nothing. A template entry with
  one of those names is replaced; every other entry is kept, after ours, so that ``$(BERTH_...)`` references in
  the user's entries expand (Kubernetes only expands variables defined earlier in the list).
- Numbers in env are decimal strings; the token only ever comes from a secretKeyRef, never as a value.
- A fleet on Kafka gets ``BERTH_KAFKA_*`` instead of ``BERTH_COORDINATOR_URL`` (``planners.kafka_pods``: the
  bootstrap list, the security protocol, the group protocol, the SASL mechanism, its principal's credentials and
  TLS material through secretKeyRefs and Secret volumes); on KIP-848's consumer protocol no session timeout or
  heartbeat interval (they are the group's configs, set by the operator). A fleet with a client certificate has it
  mounted in a mode its user can read and its containers keep their failing log's tail as their termination
  message (``planners.pod_credentials``; a change of the template that rolls such fleets once on the upgrade that
  brought it, from the 0400 before, which a non-root user could not read).
- Pods are spread over nodes and zones by default: a template without ``topologySpreadConstraints`` gets two,
  ``kubernetes.io/hostname`` and ``topology.kubernetes.io/zone``, each ``maxSkew: 1`` over the fleet's pods,
  ``whenUnsatisfiable: ScheduleAnyway`` (a preference: a drain, a cordoned or a lost node never leaves a pod
  Pending for it), so one node drained or lost takes as few of a fleet's members as the cluster allows. A template
  that sets the field (``[]`` included) keeps its own, as given (docs/operator.md "Spread over nodes").
- ``replicas`` is a parameter: the scaling planner owns the size, so applying a changed template never scales.
- Per-pod volumes (``volumeClaimTemplates``, as given) come with their ``persistentVolumeClaimRetentionPolicy``
  (Retain unless the fleet says Delete); ``updateStrategy`` appears when the fleet sets one. A fleet without them
  plans exactly what it planned before they existed, so an operator upgrade changes no StatefulSet; where they are
  absent the API server's defaults apply, which are Berth's, and :func:`updatable_spec` says what an update resets.
- The PodDisruptionBudget is ``planners.disruption_budget``'s; it carries the same metadata and selects the pods.
- TLS to Berth's coordinator: when the operator verifies coordinators against a CA of its own
  (``--coordinator-ca-file``, passed here as ``coordinator_ca``, the PEM text) and the fleet's coordinator URL is
  https, the CA (public data) travels in the pod template itself, as the annotation ``berth.dev/coordinator-ca``,
  and a downward-API volume makes it the file ``/etc/berth/coordinator-ca/ca.crt`` in every container, which
  ``BERTH_CA_FILE`` names (the member library verifies against it). No object is written into the fleet's
  namespace for it, so the operator needs no access to ConfigMaps there (issue 30: it had get, list, watch,
  create and patch on every ConfigMap of the cluster for the ConfigMap this replaced). A rotated CA changes the
  template: the fleet's pods roll once, with their static identities (no rebalance). Without a CA (the system's
  CAs) or on http, none of this is planned.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from berth.operator.planners.coordinator_target import KafkaTarget, resolve_target
from berth.operator.planners.disruption_budget import plan_disruption_budget
from berth.operator.planners.kafka_pods import (
    ENV_KAFKA_BOOTSTRAP_SERVERS,
    ENV_KAFKA_SASL_MECHANISM,
    ENV_KAFKA_SASL_PASSWORD,
    ENV_KAFKA_SASL_USERNAME,
    ENV_KAFKA_SECURITY_PROTOCOL,
    ENV_KAFKA_SSL_CA_PEM,
    consumer_protocol,
    kafka_member_env,
    kafka_secret_env,
    with_kafka_tls,
)
from berth.operator.planners.pod_credentials import with_failure_messages
from berth.operator.planners.sizing import heartbeat_interval_ms
from berth.operator.spec.fleet import Fleet, OperatorDefaults, SpecError
from berth.operator.spec.stateful import UpdateStrategy, UpdateStrategyType

FLEET_API_VERSION = "berth.dev/v1alpha1"
FLEET_KIND = "ConsumerFleet"
FLEET_LABEL = "berth.dev/fleet"
APP_NAME = "berth-consumer"
MANAGED_BY = "berth-operator"

ENV_GROUP_ID = "BERTH_GROUP_ID"
ENV_GROUP_INSTANCE_ID = "BERTH_GROUP_INSTANCE_ID"
ENV_COORDINATOR_URL = "BERTH_COORDINATOR_URL"
ENV_SESSION_TIMEOUT_MS = "BERTH_SESSION_TIMEOUT_MS"
ENV_REBALANCE_TIMEOUT_MS = "BERTH_REBALANCE_TIMEOUT_MS"
ENV_HEARTBEAT_INTERVAL_MS = "BERTH_HEARTBEAT_INTERVAL_MS"
ENV_TOKEN = "BERTH_TOKEN"
#: Re-exported: the Kafka variables are ``planners.kafka_pods``'.
KAFKA_ENV = (
    ENV_KAFKA_BOOTSTRAP_SERVERS,
    ENV_KAFKA_SECURITY_PROTOCOL,
    ENV_KAFKA_SASL_MECHANISM,
    ENV_KAFKA_SASL_USERNAME,
    ENV_KAFKA_SASL_PASSWORD,
    ENV_KAFKA_SSL_CA_PEM,
)
ENV_CA_FILE = "BERTH_CA_FILE"

COORDINATOR_CA_VOLUME = "berth-coordinator-ca"
COORDINATOR_CA_DIR = "/etc/berth/coordinator-ca"
COORDINATOR_CA_KEY = "ca.crt"
#: The pod template's annotation carrying the coordinator's CA (PEM), which the CA volume projects as a file.
COORDINATOR_CA_ANNOTATION = "berth.dev/coordinator-ca"

#: The optional StatefulSet fields an update may change (besides the template and ``replicas``), with the values
#: Kubernetes gives them when they are left out: an update whose plan drops one puts this back. The claim
#: templates, the selector, ``serviceName`` and ``podManagementPolicy`` are fixed when the StatefulSet is created.
UPDATABLE_DEFAULTS: Mapping[str, Any] = {
    "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
    "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Retain"},
}


@dataclass(frozen=True, slots=True)
class PlannedWorkload:
    """The objects to apply, plus what a local-process fleet needs to start the same members without them."""

    statefulset: dict[str, Any]
    service: dict[str, Any]
    #: The PodDisruptionBudget; None when the fleet turned it off (``spec.podDisruptionBudget.enabled: false``).
    disruption_budget: dict[str, Any] | None
    #: ``status.selector``: the pod selector as a label-selector string (for the scale subresource and HPAs).
    selector: str
    #: The plain-valued BERTH_* variables every member gets (not its instance id, not the token).
    member_env: Mapping[str, str]
    #: The ConfigMap publishing the coordinator's CA in the fleet's namespace; None: no CA to publish.

    @property
    def replicas(self) -> int:
        return int(self.statefulset["spec"]["replicas"])

    def environment_for(self, instance_id: str) -> dict[str, str]:
        """A member process's BERTH_* environment, as the downward API gives it to pod ``instance_id``."""
        return {**self.member_env, ENV_GROUP_INSTANCE_ID: instance_id}


def plan_statefulset(
    fleet: Fleet,
    *,
    operator_defaults: OperatorDefaults,
    session_timeout_ms: int,
    replicas: int,
    coordinator_ca: str | None = None,
    kafka_username: str | None = None,
) -> PlannedWorkload:
    """The fleet's StatefulSet and headless Service (and the CA ConfigMap, see the module rules).

    ``session_timeout_ms`` is the sizing decision; ``replicas`` the size the scaling planner last chose (the
    existing StatefulSet's ``spec.replicas``, or 0 when creating it: the scaling planner then grows it after
    pre-registering the members); ``kafka_username`` the fleet principal's name when its Secret has no key for
    it (``planners.kafka_pods``). Raises :class:`SpecError` when the fleet has no uid or no coordinator URL.
    """
    if fleet.uid is None:
        raise SpecError("metadata.uid", "is required to own the StatefulSet and Service")
    if replicas < 0:
        raise ValueError(f"replicas must not be negative, not {replicas}")
    target = resolve_target(fleet, operator_defaults)
    member_env = plan_member_env(
        fleet, operator_defaults=operator_defaults, session_timeout_ms=session_timeout_ms, kafka_username=kafka_username
    )
    labels = pod_labels(fleet.name)
    url = member_env.get(ENV_COORDINATOR_URL, "")
    publishes_ca = coordinator_ca is not None and url.lower().startswith("https://")
    env = _container_env(fleet, member_env)
    if isinstance(target, KafkaTarget):
        env += kafka_secret_env(target, member_env)
    template = _pod_template(fleet, labels, env)
    if isinstance(target, KafkaTarget):
        template = with_kafka_tls(template, target)
        if target.client_certificate is not None:
            template = with_failure_messages(template)
    if publishes_ca:
        assert coordinator_ca is not None
        env.append({"name": ENV_CA_FILE, "value": f"{COORDINATOR_CA_DIR}/{COORDINATOR_CA_KEY}"})
        template = _with_coordinator_ca(_pod_template(fleet, labels, env), coordinator_ca)
    return PlannedWorkload(
        statefulset={
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": _owned_metadata(fleet, labels),
            "spec": {
                "replicas": replicas,
                "serviceName": fleet.name,
                # OrderedReady: pods come and go one at a time, in ordinal order (f-4 goes before f-3).
                # Parallel: new pods start together (on Kafka, without pre-registration, one rebalance for k).
                "podManagementPolicy": fleet.spec.pod_management_policy,
                "selector": {"matchLabels": dict(labels)},
                "template": template,
                **_stateful_fields(fleet),
            },
        },
        service={
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": _owned_metadata(fleet, labels),
            "spec": {
                # Headless: it exists to give the StatefulSet's pods their stable DNS names, not to balance load.
                "clusterIP": "None",
                "selector": dict(labels),
                # Members are addressable from the moment they start, not only once ready.
                "publishNotReadyAddresses": True,
            },
        },
        disruption_budget=plan_disruption_budget(fleet, metadata=_owned_metadata(fleet, labels), pod_labels=labels),
        selector=selector_string(labels),
        member_env=member_env,
    )


def _with_coordinator_ca(template: dict[str, Any], ca_pem: str) -> dict[str, Any]:
    """The CA as the template's annotation and a downward-API volume of it, mounted read-only in every container
    (replacing entries of the same name)."""
    metadata = template.setdefault("metadata", {})
    metadata["annotations"] = {**(metadata.get("annotations") or {}), COORDINATOR_CA_ANNOTATION: ca_pem}
    pod_spec = template["spec"]
    field_path = f"metadata.annotations['{COORDINATOR_CA_ANNOTATION}']"
    volume = {
        "name": COORDINATOR_CA_VOLUME,
        "downwardAPI": {"items": [{"path": COORDINATOR_CA_KEY, "fieldRef": {"fieldPath": field_path}}]},
    }
    volumes = [v for v in pod_spec.get("volumes") or [] if v.get("name") != COORDINATOR_CA_VOLUME]
    pod_spec["volumes"] = [*volumes, volume]
    mount = {"name": COORDINATOR_CA_VOLUME, "mountPath": COORDINATOR_CA_DIR, "readOnly": True}
    for kind in ("initContainers", "containers"):
        for container in pod_spec.get(kind) or []:
            mounts = [
                m
                for m in container.get("volumeMounts") or []
                if m.get("name") != COORDINATOR_CA_VOLUME and m.get("mountPath") != COORDINATOR_CA_DIR
            ]
            container["volumeMounts"] = [*mounts, dict(mount)]
    return template


def updatable_spec(statefulset: Mapping[str, Any]) -> dict[str, Any]:
    """What an update of the planned ``statefulset`` sets: its template, update strategy and claim retention, each
    as planned or, where the plan leaves it out, as Kubernetes' default (so removing a setting undoes it)."""
    spec = statefulset["spec"]
    updates = {"template": copy.deepcopy(spec["template"])}
    updates.update({key: copy.deepcopy(spec.get(key, default)) for key, default in UPDATABLE_DEFAULTS.items()})
    return updates


def plan_member_env(
    fleet: Fleet, *, operator_defaults: OperatorDefaults, session_timeout_ms: int, kafka_username: str | None = None
) -> dict[str, str]:
    """The plain-valued BERTH_* variables of every member (decimal strings for numbers)."""
    heartbeat_ms = heartbeat_interval_ms(session_timeout_ms, operator_defaults.preferred_heartbeat_interval_ms)
    target = resolve_target(fleet, operator_defaults)
    where: dict[str, str]
    if isinstance(target, KafkaTarget):
        where = kafka_member_env(fleet, target, username=kafka_username)
    else:
        where = {ENV_COORDINATOR_URL: target.url}
    # On the consumer protocol the group's configs hold the session timeout and heartbeat: no client settings.
    session = (
        {}
        if consumer_protocol(fleet)
        else {ENV_SESSION_TIMEOUT_MS: str(session_timeout_ms), ENV_HEARTBEAT_INTERVAL_MS: str(heartbeat_ms)}
    )
    return {
        ENV_GROUP_ID: fleet.spec.group_id,
        **where,
        **{k: v for k, v in session.items() if k == ENV_SESSION_TIMEOUT_MS},
        ENV_REBALANCE_TIMEOUT_MS: str(fleet.spec.rebalance_timeout_ms),
        **{k: v for k, v in session.items() if k == ENV_HEARTBEAT_INTERVAL_MS},
    }


def pod_labels(fleet_name: str) -> dict[str, str]:
    """The labels tying pods to their fleet; also the StatefulSet's and the Service's selector."""
    return {
        "app.kubernetes.io/name": APP_NAME,
        "app.kubernetes.io/instance": fleet_name,
        FLEET_LABEL: fleet_name,
    }


def selector_string(labels: Mapping[str, str]) -> str:
    """``k=v,k=v`` in key order, the form ``kubectl get -l`` and the scale subresource take."""
    return ",".join(f"{key}={value}" for key, value in sorted(labels.items()))


def _owned_metadata(fleet: Fleet, labels: Mapping[str, str]) -> dict[str, Any]:
    return {
        "name": fleet.name,
        "namespace": fleet.namespace,
        "labels": {**labels, "app.kubernetes.io/managed-by": MANAGED_BY},
        "ownerReferences": [
            {
                "apiVersion": FLEET_API_VERSION,
                "kind": FLEET_KIND,
                "name": fleet.name,
                "uid": fleet.uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }


def describe_rollout(strategy: UpdateStrategy | None) -> str:
    """How a changed pod template reaches the pods, for the ``Updated`` Event."""
    rejoin = "rejoin as themselves, without a rebalance"
    if strategy is not None and strategy.type is UpdateStrategyType.ON_DELETE:
        return f"each pod takes it when it is next deleted (updateStrategy OnDelete), and its member will {rejoin}"
    if strategy is not None and strategy.partition:
        return (
            f"its pods from ordinal {strategy.partition} up restart one at a time and {rejoin}; those below keep"
            f" the old template (partition {strategy.partition})"
        )
    return f"its pods restart one at a time and {rejoin}"


def _stateful_fields(fleet: Fleet) -> dict[str, Any]:
    """``volumeClaimTemplates`` with their retention policy, and ``updateStrategy``, when the fleet has them."""
    stateful = fleet.spec.stateful
    fields: dict[str, Any] = {}
    if stateful.volume_claim_templates:
        fields["volumeClaimTemplates"] = [copy.deepcopy(dict(t)) for t in stateful.volume_claim_templates]
        retention = stateful.claim_retention
        fields["persistentVolumeClaimRetentionPolicy"] = {
            "whenDeleted": retention.when_deleted.value,
            "whenScaled": retention.when_scaled.value,
        }
    strategy = stateful.update_strategy
    if strategy is not None:
        planned: dict[str, Any] = {"type": strategy.type.value}
        rolling = {
            key: value
            for key, value in (("partition", strategy.partition), ("maxUnavailable", strategy.max_unavailable))
            if value is not None
        }
        if rolling:
            planned["rollingUpdate"] = rolling
        fields["updateStrategy"] = planned
    return fields


def _container_env(fleet: Fleet, member_env: Mapping[str, str]) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [{"name": ENV_GROUP_ID, "value": member_env[ENV_GROUP_ID]}]
    # The pod name is <fleet>-<ordinal>: a stable instance id that survives restarts and rescheduling.
    env.append(
        {"name": ENV_GROUP_INSTANCE_ID, "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}}
    )
    env += [
        {"name": name, "value": value}
        for name, value in member_env.items()
        if name not in (ENV_GROUP_ID, ENV_GROUP_INSTANCE_ID)
    ]
    token = fleet.spec.coordinator.token_secret_ref
    if token is not None:
        env.append({"name": ENV_TOKEN, "valueFrom": {"secretKeyRef": {"name": token.name, "key": token.key}}})
    return env


#: The topology keys a fleet's pods are spread over when its template names none (nodes, then zones).
SPREAD_KEYS = ("kubernetes.io/hostname", "topology.kubernetes.io/zone")


def default_spread(labels: Mapping[str, str]) -> list[dict[str, Any]]:
    """The topology spread constraints a fleet's pods get when its template sets none (module rules)."""
    return [
        {
            "maxSkew": 1,
            "topologyKey": key,
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": dict(labels)},
        }
        for key in SPREAD_KEYS
    ]


def _pod_template(fleet: Fleet, labels: Mapping[str, str], env: list[dict[str, Any]]) -> dict[str, Any]:
    template = copy.deepcopy(dict(fleet.spec.template))
    metadata = template.setdefault("metadata", {})
    metadata["labels"] = {**(metadata.get("labels") or {}), **labels}
    ours = {entry["name"] for entry in env}
    pod_spec = template["spec"]
    if "topologySpreadConstraints" not in pod_spec:
        pod_spec["topologySpreadConstraints"] = default_spread(labels)
    for kind in ("initContainers", "containers"):
        for container in pod_spec.get(kind) or []:
            kept = [entry for entry in container.get("env") or [] if entry.get("name") not in ours]
            container["env"] = copy.deepcopy(env) + kept
    return template
