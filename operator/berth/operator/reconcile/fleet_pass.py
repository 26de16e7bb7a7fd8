"""One reconcile pass over one ConsumerFleet, from a fresh read of it: validate, size, apply, scale, mirror.

The pass is the one reconcile loop's body, on ports only (``ports``): the operator runs it on Kubernetes (the
StatefulSet workload, the status subresource, Events), ``berth-demo`` on local processes with status in a dict,
and both on Berth's coordinator or a Kafka cluster. Steps:

1. admit (``admission``, before anything is sent anywhere): refuse an invalid spec, an endpoint the operator does
   not trust, or a group another fleet holds (``claims``); then, on Berth's coordinator, claim the group for the
   fleet (``planners.ownership``: refused ``GroupOwned`` when it is another fleet's, and nothing else is sent); then
   a session timeout no bound allows, a missing credentials Secret or a KIP-848 group: a condition and a Warning
   Event, and nothing created;
2. size the session timeout (``session_timeout``) and apply the StatefulSet and headless Service with it;
3. observe -> ``plan_scaling`` -> ``execute_plan``, status written through the API after every step;
4. mirror the workload and the coordinator's group into status and conditions.

Rules: every status write goes out at once and the pass continues from the object the API server returns, so a
pass (or an operator restarted anywhere) plans from what is stored. A coordinator that cannot be asked is recorded
(CoordinatorReachable=False, a Warning Event on the transition) and re-raised; nothing after the failed call runs,
so nothing is recorded as done. Every write to a coordinator that records owners carries the fleet's uid.
:meth:`FleetPass.finalize` is the deletion's pass: it sends the leave, the deletion or the release only for a group
the coordinator records as this fleet's, and nothing at all for another fleet's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from berth.operator.driver import GroupStillHasMembers, execute_plan
from berth.operator.kafka.port import ConsumerProtocolGroup
from berth.operator.kube.calls import ApiException, api_error_text
from berth.operator.kube.workload import planned_hash
from berth.operator.metrics import OperatorMetrics
from berth.operator.planners.conditions import parse_time
from berth.operator.planners.coordinator_target import (
    BerthTarget,
    CoordinatorTarget,
)
from berth.operator.planners.disruption_budget import describe_budget
from berth.operator.planners.observations import GroupDescription, GroupOwnerRef
from berth.operator.planners.ownership import GROUP_OWNED, group_owned_message, owner_name, owns, plan_claim
from berth.operator.planners.scaling import (
    BatchLeave,
    DeleteGroup,
    ScalingObservation,
    ScalingPlan,
    ScalingStatus,
    plan_scaling,
)
from berth.operator.planners.sizing import SessionTimeoutError
from berth.operator.planners.statefulset import PlannedWorkload, describe_rollout, plan_statefulset
from berth.operator.planners.status import COORDINATOR_REACHABLE, READY
from berth.operator.planners.volume_claims import CLAIMS_RETAINED_EVENT, claims_on_deletion, report_retained_claims
from berth.operator.ports import (
    Applied,
    ApplyResult,
    CoordinatorPort,
    CoordinatorUnavailable,
    EventSink,
    GroupOwned,
    NotOurs,
    StatusPort,
    WorkloadPort,
    WorkloadRejected,
    WorkloadView,
)
from berth.operator.reconcile import fleet_status
from berth.operator.reconcile.admission import Refusal, SecretLookup, admit, kafka_connection
from berth.operator.reconcile.advice_source import AdviceSource
from berth.operator.reconcile.claims import ClaimKey, GroupClaim, claim_key, holder_of
from berth.operator.reconcile.coordinator_kinds import consumer_protocol_message, coordinator_notes, deletes_group
from berth.operator.reconcile.coordinators import CoordinatorDirectory
from berth.operator.reconcile.evidence_journal import EvidenceRecorder
from berth.operator.reconcile.session_timeout import (
    OperatorSessionBounds,
    allowed_range,
    choose_session_timeout,
    decide_session_timeout,
)
from berth.operator.spec import Fleet, OperatorDefaults

logger = logging.getLogger("berth.operator.reconcile")

ClaimsLookup = Callable[[ClaimKey], Iterable[GroupClaim]]


class RetryLater(Exception):
    """The pass stopped on a failure that was reported (Event, log); the handler retries with backoff."""


@dataclass(frozen=True, slots=True)
class PassResult:
    waiting: str | None = None  # what the fleet still waits for (the next pass continues); None: converged
    refused: bool = False  # the fleet was refused (invalid, or its group is another fleet's)
    #: The Berth coordinator URL and group id whose journal this fleet's status follows (None: none, e.g. Kafka).
    follows: tuple[str, str] | None = None


@dataclass
class PassContext:
    """What every pass shares: the ports' factories, the operator's settings and a little memory across passes."""

    status_for: Callable[[Mapping[str, Any]], StatusPort]
    workload_for: Callable[[Fleet], WorkloadPort]
    coordinators: CoordinatorDirectory
    advice: AdviceSource
    defaults: OperatorDefaults
    session_bounds: OperatorSessionBounds
    events_for: Callable[[Mapping[str, Any]], EventSink]
    now: Callable[[], datetime]
    #: The last "waiting for ..." said per fleet uid, so each wait is announced once, not once per pass.
    last_waiting: dict[str, str]
    #: Advice problems already logged, so a broken advice.json is reported once, not once per fleet per pass.
    advice_problems_seen: set[str]
    #: Reads the Secrets a Kafka fleet names for its principal (None: no Secrets, e.g. berth-demo).
    secrets: SecretLookup | None = None
    #: Records what the operator observes of Kafka groups (None: not kept).
    evidence: EvidenceRecorder | None = None
    #: How long past its grace period a departing pod stuck Terminating is waited for (--stuck-terminating-s).
    stuck_allowance: timedelta = timedelta(minutes=2)
    #: Where what the passes do is counted (None: not counted, e.g. berth-demo).
    metrics: OperatorMetrics | None = None
    #: The CA (PEM) the operator verifies https coordinators against, published to fleets on one (None: none).
    coordinator_ca: Callable[[], str | None] = lambda: None


class FleetPass:
    def __init__(self, context: PassContext, body: Mapping[str, Any], claims: ClaimsLookup) -> None:
        self.ctx = context
        self.body = body
        self.status: dict[str, Any] = dict(body.get("status") or {})
        self.claims = claims
        self.events = context.events_for(body)
        self.status_port = context.status_for(body)
        metadata = body.get("metadata") or {}
        self.namespace = str(metadata.get("namespace") or "default")
        self.name = str(metadata.get("name") or "")
        self.uid = str(metadata.get("uid") or "")
        self.generation: int | None = metadata.get("generation")

    # ---------------------------------------------------------------------------------------------- passes

    async def run(self) -> PassResult:
        admitted = await self._admit()
        if isinstance(admitted, Refusal):
            return await self._refuse(admitted.reason, admitted.message)
        fleet, target = admitted
        try:
            coordinator = await self._coordinator_for(fleet, target)
            return await self._reconcile(fleet, target, coordinator)
        except Refusal as refusal:
            return await self._refuse(refusal.reason, refusal.message)
        except ConsumerProtocolGroup:
            return await self._refuse(fleet_status.CONSUMER_PROTOCOL_GROUP, consumer_protocol_message(fleet, target))
        except GroupOwned as owned:
            return await self._refuse(GROUP_OWNED, group_owned_message(fleet.spec.group_id, str(target), owned.owner))
        except CoordinatorUnavailable as error:
            await self._record_unreachable(error)
            raise
        except ApiException as error:
            self.events.warning("KubernetesApiError", f"a Kubernetes API call failed: {api_error_text(error)}")
            raise RetryLater(api_error_text(error)) from error

    async def finalize(self) -> str | None:
        """One step of the deletion: None once the fleet may be released, else what it still waits for."""
        admitted = await self._admit()
        if isinstance(admitted, Refusal):
            self.events.info("Released", admitted.release)
            return None
        fleet, target = admitted
        workload = self.ctx.workload_for(fleet)
        view = await workload.observe()
        if (
            view.observation.replicas is None
            and not self.status.get("departing")
            and (self.status.get("expectedMembers") is None)
        ):
            # No StatefulSet was ever created, so no member joined and nothing was pre-registered.
            self.events.info("Released", "nothing was created for this fleet")
            return None
        try:
            coordinator = await self._coordinator_for(fleet, target)
            description = await coordinator.describe(fleet.spec.group_id)
            if coordinator.records_owners and not owns(description, self.uid):
                # Never claimed (refused), or another fleet's: its members, offsets and owner are not ours to touch.
                self.events.info(
                    "Released",
                    f"group {fleet.spec.group_id} on {target} is not this fleet's (owned by"
                    f" {owner_name(description.owner)}): left it untouched{claims_on_deletion(fleet)}",
                )
                return None
            plan = self._plan(fleet, view, description, coordinator, deleting=True)
            await self._execute(fleet, plan, workload, coordinator)
        except GroupOwned as owned:
            self.events.info(
                "Released",
                f"group {fleet.spec.group_id} on {target} is not this fleet's (owned by {owner_name(owned.owner)}):"
                f" left it untouched{claims_on_deletion(fleet)}",
            )
            return None
        except Refusal as refusal:
            self.events.warning(refusal.reason, f"{refusal.message}; the fleet is kept until that is fixed")
            raise RetryLater(refusal.message) from refusal
        except ConsumerProtocolGroup as error:
            message = consumer_protocol_message(fleet, target)
            self.events.warning(fleet_status.CONSUMER_PROTOCOL_GROUP, f"{message}: releasing the fleet")
            del error
            return None
        except CoordinatorUnavailable as error:
            await self._record_unreachable(error)
            raise
        except GroupStillHasMembers as error:
            self.events.warning("GroupNotEmpty", str(error))
            raise RetryLater(str(error)) from error
        except ApiException as error:
            self.events.warning("KubernetesApiError", f"a Kubernetes API call failed: {api_error_text(error)}")
            raise RetryLater(api_error_text(error)) from error
        if plan.done:
            deleted = any(isinstance(action, DeleteGroup) for action in plan.actions)
            what = (
                f"left and deleted group {fleet.spec.group_id}"
                if deleted
                else (
                    f"left group {fleet.spec.group_id} (kept, with its committed offsets: spec.deleteGroupOnDelete"
                    + ("; released: owned by no fleet)" if coordinator.records_owners else ")")
                )
            )
            self.events.info("Finalized", f"scaled to 0, {what}: releasing the fleet{claims_on_deletion(fleet)}")
            return None
        self._announce_waiting(plan.waiting)
        return plan.waiting

    # ------------------------------------------------------------------------------------------- admission

    async def _admit(self) -> tuple[Fleet, CoordinatorTarget] | Refusal:
        """Whether this fleet may act at all, before anything is sent anywhere (``admission``)."""
        return admit(self.body, self.ctx.defaults, self._other_holder)

    async def _coordinator_for(self, fleet: Fleet, target: CoordinatorTarget) -> CoordinatorPort:
        if isinstance(target, BerthTarget):
            return self.ctx.coordinators.port(target.url)
        return await self.ctx.coordinators.kafka_port(await kafka_connection(fleet, target, self.ctx.secrets))

    # ----------------------------------------------------------------------------------------------- steps

    async def _reconcile(self, fleet: Fleet, target: CoordinatorTarget, coordinator: CoordinatorPort) -> PassResult:
        reachable_before = fleet_status.condition_status(self.status, COORDINATOR_REACHABLE)
        bounds = await self.ctx.coordinators.bounds_of(coordinator)
        if coordinator.records_owners:
            await self._claim(fleet, target, coordinator)
        if not coordinator.pre_registers:
            # On Kafka, a group of the KIP-848 consumer protocol is refused before anything is created for it.
            await coordinator.describe(fleet.spec.group_id)
        reading = await self.ctx.advice.current()
        for problem in reading.problems:
            if problem not in self.ctx.advice_problems_seen:
                self.ctx.advice_problems_seen.add(problem)
                logger.warning("session-timeout advice not used: %s", problem)
        workload = self.ctx.workload_for(fleet)
        view = await workload.observe()
        spec = fleet.spec.session_timeout
        try:
            decision = decide_session_timeout(
                spec, fleet.spec.template, reading.for_group(fleet.spec.group_id), bounds, self.ctx.session_bounds
            )
        except SessionTimeoutError as error:
            return await self._refuse(fleet_status.INVALID_SESSION_TIMEOUT, f"no valid session timeout: {error}")
        current_ms = self.status.get("sessionTimeoutMs")
        current_reason = self.status.get("sessionTimeoutReason")
        replicas_now = view.observation.replicas or 0
        rolls_anyway = view.applied_hash is None or (
            isinstance(current_ms, int) and self._planned(fleet, current_ms, replicas_now).hash != view.applied_hash
        )
        choice = choose_session_timeout(
            decision,
            policy=spec.policy,
            current_ms=current_ms if isinstance(current_ms, int) else None,
            current_reason=current_reason if isinstance(current_reason, str) else None,
            allowed=allowed_range(spec, bounds, self.ctx.session_bounds),
            pods_roll_anyway=rolls_anyway,
        )
        planned = self._planned(fleet, choice.ms, replicas_now)
        try:
            applied = await workload.apply(planned.workload)
        except NotOurs as error:
            return await self._refuse(fleet_status.NAME_TAKEN, str(error))
        except WorkloadRejected as error:
            return await self._refuse(fleet_status.TEMPLATE_REJECTED, str(error))
        self._announce_applied(fleet, applied, planned.workload)
        if choice.ms != current_ms or choice.reason != current_reason:
            await self._write({"sessionTimeoutMs": choice.ms, "sessionTimeoutReason": choice.reason})
            if choice.ms != current_ms:
                self.events.info("SessionTimeout", f"session timeout {choice.ms} ms: {choice.reason}")
        if applied.changed:
            view = await workload.observe()

        description = await coordinator.describe(fleet.spec.group_id)
        plan = self._plan(fleet, view, description, coordinator, deleting=False)
        await self._execute(fleet, plan, workload, coordinator)
        self._announce_waiting(plan.waiting)
        if plan.actions:
            view = await workload.observe()
            description = await coordinator.describe(fleet.spec.group_id)
        if self.ctx.evidence is not None and not coordinator.pre_registers:
            # Kafka keeps no journal: what this describe shows, compared with the last, is the evidence.
            await self.ctx.evidence.observed(self.uid, description, int(self.ctx.now().timestamp() * 1000))
        await self._write_view(fleet, planned.workload.selector, view, description, coordinator)
        self._count_state(refused=False)
        if reachable_before == "False":
            self.events.info("CoordinatorReachable", f"the coordinator at {target} answers again")
        follows = (target.url, fleet.spec.group_id) if isinstance(target, BerthTarget) else None
        return PassResult(waiting=plan.waiting, follows=follows)

    async def _claim(self, fleet: Fleet, target: CoordinatorTarget, coordinator: CoordinatorPort) -> None:
        """Make the group this fleet's at the coordinator before anything else is sent for it (raises GroupOwned)."""
        description = await coordinator.describe(fleet.spec.group_id)
        me = GroupOwnerRef(fleet.namespace, fleet.name, self.uid)
        claim = plan_claim(description, me, adopt=fleet.spec.coordinator.adopt_group, status=self.status)
        if claim is None:
            return
        await coordinator.claim_group(fleet.spec.group_id, claim.owner, adopt=claim.adopt)
        adopted = " (adopted: it was in use)" if claim.adopt and description.state != "Dead" else ""
        self.events.info("GroupClaimed", f"group {fleet.spec.group_id} on {target} is this fleet's{adopted}")

    def _plan(
        self,
        fleet: Fleet,
        view: WorkloadView,
        description: GroupDescription,
        coordinator: CoordinatorPort,
        *,
        deleting: bool,
    ) -> ScalingPlan:
        observed = view.observation
        self.planned_at = self.ctx.now()
        return plan_scaling(
            ScalingObservation(
                fleet_name=fleet.name,
                desired_replicas=fleet.spec.replicas,
                workload_replicas=observed.replicas,
                existing_pods=observed.existing,
                workload_settled=observed.settled,
                status=ScalingStatus.from_status(self.status),
                pre_register=fleet.spec.pre_register,
                leave_on_scale_down=fleet.spec.leave_on_scale_down,
                deleting=deleting,
                group_members=description.static_instance_ids(),
                coordinator_pre_registers=coordinator.pre_registers,
                delete_group=deletes_group(fleet, coordinator),
                release_owner=coordinator.records_owners,
                terminating=observed.terminating,
                stuck_allowance=self.ctx.stuck_allowance,
            ),
            now=self.ctx.now(),
        )

    async def _execute(
        self, fleet: Fleet, plan: ScalingPlan, workload: WorkloadPort, coordinator: CoordinatorPort
    ) -> None:
        recorder = self.ctx.evidence if not coordinator.pre_registers else None

        async def on_leave(leave: BatchLeave, results: Mapping[str, str]) -> None:
            if self.ctx.metrics is not None:
                answered = self.ctx.now()
                started = parse_time(leave.departing_since)
                self.ctx.metrics.left(
                    self.namespace,
                    self.name,
                    removed=sum(1 for name in leave.member_ids if results.get(name) == "NONE"),
                    delay_s=(answered - self.planned_at).total_seconds(),
                    since_start_s=(answered - started).total_seconds() if started else None,
                )
            if recorder is not None:
                now_ms = int(self.ctx.now().timestamp() * 1000)
                await recorder.removed(self.uid, fleet.spec.group_id, results, everyone=leave.everyone, now_ms=now_ms)

        await execute_plan(
            plan,
            group_id=fleet.spec.group_id,
            workload=workload,
            coordinator=coordinator,
            patch_status=self._write,
            events=self.events,
            now=self.ctx.now,
            on_leave=on_leave,
            owner_uid=self.uid if coordinator.records_owners else None,
        )

    async def _write_view(
        self,
        fleet: Fleet,
        selector: str,
        view: WorkloadView,
        description: GroupDescription,
        coordinator: CoordinatorPort,
    ) -> None:
        was_refused = fleet_status.condition_status(self.status, fleet_status.SPEC_VALID) == "False"
        patch = fleet_status.view_patch(
            fleet_name=fleet.name,
            group_id=fleet.spec.group_id,
            desired_replicas=fleet.spec.replicas,
            status=self.status,
            selector=selector,
            running=view.running,
            ready=view.observation.ready,
            description=description,
            unreachable_reason="",
            now=self.ctx.now(),
            generation=self.generation,
            notes=coordinator_notes(fleet, coordinator),
        )
        await self._write(fleet_status.only_changes(self.status, patch))
        claims = report_retained_claims(fleet, self.status, claims=view.claims, existing_pods=view.observation.existing)
        await self._write(claims.patch)
        if claims.event is not None:
            self.events.info(CLAIMS_RETAINED_EVENT, claims.event)
        if was_refused:
            self.events.info("Accepted", "the spec is valid and the group is this fleet's: reconciling it")

    async def _refuse(self, reason: str, message: str) -> PassResult:
        if not fleet_status.refused_before(self.status, reason, message):
            self.events.warning(reason, message)
        patch = fleet_status.refusal_patch(
            self.status, reason=reason, message=message, now=self.ctx.now(), generation=self.generation
        )
        await self._write(fleet_status.only_changes(self.status, patch))
        self._count_state(refused=True)
        return PassResult(refused=True)

    def _count_state(self, *, refused: bool) -> None:
        if self.ctx.metrics is not None:
            ready = fleet_status.condition_status(self.status, READY) == "True"
            departing = len(self.status.get("departing") or ())
            self.ctx.metrics.state(self.namespace, self.name, ready=ready, refused=refused, departing=departing)

    async def _record_unreachable(self, error: CoordinatorUnavailable) -> None:
        was = fleet_status.find_condition(self.status, COORDINATOR_REACHABLE) or {}
        message = str(error)  # the port's own words, naming the coordinator (never text it sent)
        patch = fleet_status.unreachable_patch(
            self.status,
            reason=message,
            now=self.ctx.now(),
            generation=self.generation,
            condition_reason=error.reason,
        )
        try:
            await self._write(fleet_status.only_changes(self.status, patch))
        except ApiException as write_error:  # the condition is auxiliary: the retry matters more
            logger.warning("could not record the unreachable coordinator: %s", api_error_text(write_error))
        if was.get("status") != "False" or was.get("reason") != error.reason:
            self.events.warning(
                f"Coordinator{error.reason}", f"{message}; nothing was recorded as done, retrying with backoff"
            )

    async def _write(self, patch: Mapping[str, Any]) -> None:
        if not patch:
            return
        self.status = dict(await self.status_port.patch_status(patch))

    # ------------------------------------------------------------------------------------------- helpers

    def _other_holder(self, fleet: Fleet, target: CoordinatorTarget) -> GroupClaim | None:
        holder = holder_of(self.claims(claim_key(target.identity, fleet.spec.group_id)))
        return holder if holder is not None and holder.uid != self.uid else None

    def _planned(self, fleet: Fleet, session_timeout_ms: int, replicas: int) -> _Planned:
        workload = plan_statefulset(
            fleet,
            operator_defaults=self.ctx.defaults,
            session_timeout_ms=session_timeout_ms,
            replicas=replicas,
            coordinator_ca=self.ctx.coordinator_ca(),
        )
        return _Planned(workload, planned_hash(workload.statefulset))

    def _announce_applied(self, fleet: Fleet, applied: ApplyResult, planned: PlannedWorkload) -> None:
        name = fleet.name
        timeout = planned.member_env.get("BERTH_SESSION_TIMEOUT_MS", "?")
        if applied.statefulset is Applied.CREATED:
            self.events.info(
                "Created",
                f"created StatefulSet {name} at {planned.replicas} replicas"
                f" ({planned.statefulset['spec']['podManagementPolicy']}, session timeout"
                f" {timeout} ms); the scaling step sizes it next",
            )
        elif applied.statefulset is Applied.UPDATED:
            self.events.info(
                "Updated",
                f"updated the pod template of StatefulSet {name} (session timeout {timeout} ms):"
                f" {describe_rollout(fleet.spec.stateful.update_strategy)}",
            )
        if applied.service is Applied.CREATED:
            self.events.info("Created", f"created headless Service {name}")
        elif applied.service is Applied.UPDATED:
            self.events.info("Updated", f"updated headless Service {name}")
        budget = describe_budget(applied.disruption_budget, name, fleet.spec.stateful.disruption_budget)
        if budget is not None:
            self.events.info(*budget)

    def _announce_waiting(self, waiting: str | None) -> None:
        if waiting is None:
            self.ctx.last_waiting.pop(self.uid, None)
        elif self.ctx.last_waiting.get(self.uid) != waiting:
            self.ctx.last_waiting[self.uid] = waiting
            self.events.info("Waiting", waiting)


@dataclass(frozen=True, slots=True)
class _Planned:
    workload: PlannedWorkload
    hash: str
