"""The status blocks a reconcile writes besides the scaling planner's: the fleet's view, conditions, refusals.

Owns the condition ``SpecValid``, its refusal reasons and :class:`Refusal`, the decision that carries one (the
other planners own Ready, CoordinatorReachable, Rebalancing and ScaleDownPending), and the keys ``replicas``,
``readyReplicas``, ``ready`` ("3/5"), ``groupId``, ``sessionTimeout`` ("45s", from ``sessionTimeoutMs``),
``selector``, ``instanceIds``, ``group``, ``conditions`` and ``observedGeneration``.
Rules: pure functions of what was read; :func:`only_changes` trims a patch to the keys whose value differs, so an
idle fleet's reconcile writes nothing (every write is a watch event for every client); ``group`` is written whole
(:func:`replacing`: a member gone, or owning nothing now, keeps no entry in ``group.assignment``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from berth.operator.planners.conditions import Condition, format_duration_ms, merge_conditions
from berth.operator.planners.instances import instance_ids
from berth.operator.planners.observations import GroupDescription
from berth.operator.planners.status import READY, PodsBlocked, plan_group_status
from berth.operator.spec.fleet import Fleet

SPEC_VALID = "SpecValid"

# Refusal reasons (the condition's reason and the Warning Event's).
INVALID_SPEC = "InvalidSpec"
GROUP_ID_IN_USE = "GroupIdInUse"
INVALID_SESSION_TIMEOUT = "InvalidSessionTimeout"
NAME_TAKEN = "NameTaken"
TEMPLATE_REJECTED = "TemplateRejected"
UNTRUSTED_ENDPOINT = "UntrustedEndpoint"
CREDENTIALS_MISSING = "CredentialsMissing"
SECRETS_NOT_READABLE = "SecretsNotReadable"
CONSUMER_PROTOCOL_GROUP = "ConsumerProtocolGroup"
STREAMS_PROTOCOL_GROUP = "StreamsProtocolGroup"

#: On a coordinator without pre-registration (Kafka): says what that means for scale-ups.
PRE_REGISTRATION = "PreRegistration"
#: On Kafka: the protocol the group uses, and whether the fleet's pods are set up for it.
GROUP_PROTOCOL = "GroupProtocol"


class Refusal(Exception):
    """The fleet is refused (SpecValid=False, a Warning Event) and nothing more is done this pass."""

    def __init__(self, reason: str, message: str, *, release: str = "") -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        #: What the deletion says when it releases a fleet refused this way.
        self.release = release or f"{message}: nothing of this fleet to clean up"


def refusal_patch(
    status: Mapping[str, Any], *, reason: str, message: str, now: datetime, generation: int | None
) -> dict[str, Any]:
    """SpecValid=False and Ready=False, both saying why nothing is done for this fleet."""
    conditions = merge_conditions(
        status.get("conditions"),
        [Condition(READY, "False", reason, message), Condition(SPEC_VALID, "False", reason, message)],
        now=now,
        observed_generation=generation,
    )
    return {"conditions": conditions, "observedGeneration": generation}


def refused_before(status: Mapping[str, Any], reason: str, message: str) -> bool:
    """Whether status already says exactly this refusal (then its Warning Event was already posted)."""
    condition = find_condition(status, SPEC_VALID)
    return condition is not None and (condition.get("status"), condition.get("reason"), condition.get("message")) == (
        "False",
        reason,
        message,
    )


def view_patch(
    *,
    fleet_name: str,
    group_id: str,
    desired_replicas: int,
    status: Mapping[str, Any],
    selector: str,
    running: int,
    ready: int,
    description: GroupDescription | None,
    unreachable_reason: str,
    now: datetime,
    generation: int | None,
    notes: tuple[Condition, ...] = (),
    not_ready: tuple[str, ...] = (),
    blocked: PodsBlocked | None = None,
) -> dict[str, Any]:
    """The fleet's view for status: its pods, its group as the coordinator sees it, and every condition
    (``notes``: conditions the coordinator's kind adds, such as PreRegistration on Kafka)."""
    ids = instance_ids(fleet_name, desired_replicas)
    plan = plan_group_status(
        fleet_name,
        description,
        instance_ids=ids,
        departing=list(status.get("departing") or ()),
        previous_conditions=status.get("conditions"),
        now=now,
        observed_generation=generation,
        unreachable_reason=unreachable_reason,
        ready_replicas=ready,
        not_ready=not_ready,
        blocked=blocked,
    )
    conditions = merge_conditions(
        plan.conditions,
        [Condition(SPEC_VALID, "True", "Accepted", "the spec is valid and the group is this fleet's"), *notes],
        now=now,
        observed_generation=generation,
    )
    patch: dict[str, Any] = {
        "replicas": running,
        "readyReplicas": ready,
        "ready": f"{ready}/{desired_replicas}",
        "groupId": group_id,
        "selector": selector,
        "instanceIds": list(ids),
        # Present and empty when nothing departs (the scaling planner writes it only when it changes).
        "departing": list(status.get("departing") or ()),
        "conditions": conditions,
        "observedGeneration": generation,
    }
    if isinstance(status.get("sessionTimeoutMs"), int):
        patch["sessionTimeout"] = format_duration_ms(status["sessionTimeoutMs"])
    if plan.group is not None:
        # The whole block, not merged into the last one: a member gone, or owning nothing now, leaves no entry behind.
        patch["group"] = replacing(status.get("group"), plan.group)
    elif description is not None:
        patch["group"] = None  # the coordinator knows no such group: nothing to show (a merge patch removes it)
    return patch


TOKEN_SECRET_MISSING = "TokenSecretMissing"


def token_secret_blocked(fleet: Fleet, config_errors: Iterable[str]) -> PodsBlocked | None:
    """What keeps the pods from starting when the Secret their token comes from (``spec.coordinator.tokenSecretRef``)
    is missing or lacks the key, as the kubelet says it in the pods' status (``config_errors``: the messages of
    containers waiting with CreateContainerConfigError). The operator never reads the Secret itself: it may not be
    granted Secrets in the fleet's namespace, and the kubelet has already told."""
    ref = fleet.spec.coordinator.token_secret_ref
    if ref is None:
        return None
    where = f"Secret {fleet.namespace}/{ref.name}"
    messages = list(config_errors)
    if any(f'secret "{ref.name}" not found' in message for message in messages):
        problem = "does not exist"
    elif any(f"couldn't find key {ref.key} in Secret {fleet.namespace}/{ref.name}" in message for message in messages):
        problem = f"has no key {ref.key}"
    else:
        return None
    secret_missing = problem == "does not exist"
    return PodsBlocked(
        TOKEN_SECRET_MISSING,
        f"{where} (spec.coordinator.tokenSecretRef) {problem}: the pods cannot start until it"
        f" {'exists' if secret_missing else 'does'} (they take their coordinator token from it)",
    )


def unreachable_patch(
    status: Mapping[str, Any],
    *,
    reason: str,
    now: datetime,
    generation: int | None,
    condition_reason: str = "Unreachable",
) -> dict[str, Any]:
    """Conditions when the coordinator could not be asked; everything else keeps its last known value."""
    plan = plan_group_status(
        "",
        None,
        instance_ids=(),
        departing=list(status.get("departing") or ()),
        previous_conditions=status.get("conditions"),
        now=now,
        observed_generation=generation,
        unreachable_reason=reason,
        reachable_reason=condition_reason,
    )
    return {"conditions": plan.conditions}


def find_condition(status: Mapping[str, Any], condition_type: str) -> Mapping[str, Any] | None:
    for condition in status.get("conditions") or ():
        if isinstance(condition, Mapping) and condition.get("type") == condition_type:
            return condition
    return None


def condition_status(status: Mapping[str, Any], condition_type: str) -> str | None:
    condition = find_condition(status, condition_type)
    return None if condition is None else condition.get("status")


def only_changes(status: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """The entries of ``patch`` that would change ``status``; a null in a merge patch removes a key, so a null and
    an absent key are the same value here."""
    return {key: value for key, value in patch.items() if _without_nulls(status.get(key)) != _without_nulls(value)}


def _without_nulls(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _without_nulls(item) for key, item in value.items() if item is not None}
    return value


def composable(first: Mapping[str, Any], then: Mapping[str, Any]) -> bool:
    """Whether ``merge_patch(first, then, keep_nulls=True)`` does what ``first`` and then ``then`` do: not where
    ``then`` merges a map into a key ``first`` nulls or sets to something else (one patch cannot say "replace")."""
    for key, value in then.items():
        if key in first and isinstance(value, Mapping):
            before = first[key]
            if not isinstance(before, Mapping) or not composable(before, value):
                return False
    return True


def replacing(before: Any, after: Mapping[str, Any]) -> dict[str, Any]:
    """A merge patch that makes ``before`` exactly ``after``: every key ``before`` has and ``after`` lacks nulled, in
    nested maps too (a merge patch merges a map into a map, so without the nulls a key once written stays)."""
    patch = dict(after)
    if isinstance(before, Mapping):
        for key, value in before.items():
            if key not in after:
                patch[key] = None
            elif isinstance(value, Mapping) and isinstance(after[key], Mapping):
                patch[key] = replacing(value, after[key])
    return patch


def merge_patch(target: Mapping[str, Any], patch: Mapping[str, Any], *, keep_nulls: bool = False) -> dict[str, Any]:
    """``target`` with the JSON merge patch ``patch`` applied (RFC 7386: a null removes a key, a map merges into a
    map, anything else replaces); ``keep_nulls``: the nulls kept (two patches merged into one)."""
    merged = dict(target)
    for key, value in patch.items():
        if value is None and not keep_nulls:
            merged.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = merge_patch(merged[key], value, keep_nulls=keep_nulls)
        elif isinstance(value, Mapping) and not keep_nulls:
            merged[key] = merge_patch({}, value)
        else:
            merged[key] = value
    return merged
