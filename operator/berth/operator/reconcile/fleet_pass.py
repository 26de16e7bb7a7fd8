"""One reconcile pass over one ConsumerFleet, from a fresh read of it: validate, size, apply, scale, mirror.

The pass is the one reconcile loop's body, on ports only (``ports``): the operator runs it on Kubernetes (the
StatefulSet workload, the status subresource, Events), ``berth-demo`` on local processes with status in a dict,
and both on Berth's coordinator or a Kafka cluster. Steps:

1. refuse an invalid spec, a group another fleet holds (``claims``), or a session timeout no bound allows: a
   condition and a Warning Event, and nothing created;
2. size the session timeout (``session_timeout``) and apply the StatefulSet and headless Service with it;
3. observe -> ``plan_scaling`` -> ``execute_plan``, status written through the API after every step;
4. mirror the workload and the coordinator's group into status and conditions.

Rules: every status write goes out at once and the pass continues from the object the API server returns, so a
pass (or an operator restarted anywhere) plans from what is stored. A coordinator that cannot be asked is recorded
(CoordinatorReachable=False, a Warning Event on the transition) and re-raised; nothing after the failed call runs,
so nothing is recorded as done. :meth:`FleetPass.finalize` is the deletion's pass.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from berth.operator.driver import GroupStillHasMembers, execute_plan
from berth.operator.kube.calls import ApiException, api_error_text
from berth.operator.kube.workload import planned_hash
from berth.operator.planners.observations import GroupDescription
from berth.operator.planners.scaling import ScalingObservation, ScalingPlan, ScalingStatus, plan_scaling
from berth.operator.planners.sizing import SessionTimeoutError
from berth.operator.planners.statefulset import PlannedWorkload, plan_statefulset
from berth.operator.planners.status import COORDINATOR_REACHABLE
from berth.operator.ports import (
    Applied,
    ApplyResult,
    CoordinatorPort,
    CoordinatorUnavailable,
    EventSink,
    NotOurs,
    StatusPort,
    WorkloadPort,
    WorkloadRejected,
    WorkloadView,
)
from berth.operator.reconcile import fleet_status
from berth.operator.reconcile.advice_source import AdviceSource
from berth.operator.reconcile.claims import ClaimKey, GroupClaim, claim_key, holder_of
from berth.operator.reconcile.coordinators import CoordinatorDirectory
from berth.operator.reconcile.session_timeout import (
    OperatorSessionBounds,
    allowed_range,
    choose_session_timeout,
    decide_session_timeout,
)
from berth.operator.spec import Fleet, OperatorDefaults, SpecError, parse_fleet, resolve_coordinator_url

logger = logging.getLogger("berth.operator.reconcile")

ClaimsLookup = Callable[[ClaimKey], Iterable[GroupClaim]]


class RetryLater(Exception):
    """The pass stopped on a failure that was reported (Event, log); the handler retries with backoff."""


@dataclass(frozen=True, slots=True)
class PassResult:
    waiting: str | None = None  # what the fleet still waits for (the next pass continues); None: converged
    refused: bool = False  # the fleet was refused (invalid, or its group is another fleet's)


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
        try:
            fleet = parse_fleet(self.body)
            url = resolve_coordinator_url(fleet, self.ctx.defaults)
        except SpecError as error:
            return await self._refuse(fleet_status.INVALID_SPEC, f"invalid spec: {error}")
        holder = self._other_holder(fleet, url)
        if holder is not None:
            return await self._refuse(
                fleet_status.GROUP_ID_IN_USE,
                f"group {fleet.spec.group_id} on {url} is already used by fleet {holder.fleet}: nothing is created"
                " for this fleet while that one exists",
            )
        coordinator = self.ctx.coordinators.port(url)
        try:
            return await self._reconcile(fleet, url, coordinator)
        except CoordinatorUnavailable as error:
            await self._record_unreachable(url, _root_cause(error))
            raise
        except ApiException as error:
            self.events.warning("KubernetesApiError", f"a Kubernetes API call failed: {api_error_text(error)}")
            raise RetryLater(api_error_text(error)) from error

    async def finalize(self) -> str | None:
        """One step of the deletion: None once the fleet may be released, else what it still waits for."""
        try:
            fleet = parse_fleet(self.body)
            url = resolve_coordinator_url(fleet, self.ctx.defaults)
        except SpecError as error:
            self.events.info("Released", f"the spec is invalid ({error}): nothing of this fleet to clean up")
            return None
        holder = self._other_holder(fleet, url)
        if holder is not None:
            self.events.info(
                "Released", f"group {fleet.spec.group_id} belongs to fleet {holder.fleet}: left it untouched"
            )
            return None
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
        coordinator = self.ctx.coordinators.port(url)
        try:
            description = await coordinator.describe(fleet.spec.group_id)
            plan = self._plan(fleet, view, description, coordinator, deleting=True)
            await self._execute(fleet, plan, workload, coordinator)
        except CoordinatorUnavailable as error:
            await self._record_unreachable(url, _root_cause(error))
            raise
        except GroupStillHasMembers as error:
            self.events.warning("GroupNotEmpty", str(error))
            raise RetryLater(str(error)) from error
        except ApiException as error:
            self.events.warning("KubernetesApiError", f"a Kubernetes API call failed: {api_error_text(error)}")
            raise RetryLater(api_error_text(error)) from error
        if plan.done:
            self.events.info(
                "Finalized", f"scaled to 0, left and deleted group {fleet.spec.group_id}: releasing the fleet"
            )
            return None
        self._announce_waiting(plan.waiting)
        return plan.waiting

    # ----------------------------------------------------------------------------------------------- steps

    async def _reconcile(self, fleet: Fleet, url: str, coordinator: CoordinatorPort) -> PassResult:
        reachable_before = fleet_status.condition_status(self.status, COORDINATOR_REACHABLE)
        bounds = await self.ctx.coordinators.bounds(url)
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
        await self._write_view(fleet, planned.workload.selector, view, description)
        if reachable_before == "False":
            self.events.info("CoordinatorReachable", f"the coordinator at {url} answers again")
        return PassResult(waiting=plan.waiting)

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
            ),
            now=self.ctx.now(),
        )

    async def _execute(
        self, fleet: Fleet, plan: ScalingPlan, workload: WorkloadPort, coordinator: CoordinatorPort
    ) -> None:
        await execute_plan(
            plan,
            group_id=fleet.spec.group_id,
            workload=workload,
            coordinator=coordinator,
            patch_status=self._write,
            events=self.events,
            now=self.ctx.now,
        )

    async def _write_view(self, fleet: Fleet, selector: str, view: WorkloadView, description: GroupDescription) -> None:
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
        )
        await self._write(fleet_status.only_changes(self.status, patch))
        if was_refused:
            self.events.info("Accepted", "the spec is valid and the group is this fleet's: reconciling it")

    async def _refuse(self, reason: str, message: str) -> PassResult:
        if not fleet_status.refused_before(self.status, reason, message):
            self.events.warning(reason, message)
        patch = fleet_status.refusal_patch(
            self.status, reason=reason, message=message, now=self.ctx.now(), generation=self.generation
        )
        await self._write(fleet_status.only_changes(self.status, patch))
        return PassResult(refused=True)

    async def _record_unreachable(self, url: str, error: str) -> None:
        was = fleet_status.condition_status(self.status, COORDINATOR_REACHABLE)
        message = f"cannot reach the coordinator at {url}: {error}"
        patch = fleet_status.unreachable_patch(
            self.status, reason=message, now=self.ctx.now(), generation=self.generation
        )
        try:
            await self._write(fleet_status.only_changes(self.status, patch))
        except ApiException as write_error:  # the condition is auxiliary: the retry matters more
            logger.warning("could not record the unreachable coordinator: %s", api_error_text(write_error))
        if was != "False":
            self.events.warning(
                "CoordinatorUnreachable", f"{message}; nothing was recorded as done, retrying with backoff"
            )

    async def _write(self, patch: Mapping[str, Any]) -> None:
        if not patch:
            return
        self.status = dict(await self.status_port.patch_status(patch))

    # ------------------------------------------------------------------------------------------- helpers

    def _other_holder(self, fleet: Fleet, url: str) -> GroupClaim | None:
        holder = holder_of(self.claims(claim_key(url, fleet.spec.group_id)))
        return holder if holder is not None and holder.uid != self.uid else None

    def _planned(self, fleet: Fleet, session_timeout_ms: int, replicas: int) -> _Planned:
        workload = plan_statefulset(
            fleet, operator_defaults=self.ctx.defaults, session_timeout_ms=session_timeout_ms, replicas=replicas
        )
        return _Planned(workload, planned_hash(workload.statefulset))

    def _announce_applied(self, fleet: Fleet, applied: ApplyResult, planned: PlannedWorkload) -> None:
        name = fleet.name
        timeout = planned.member_env.get("BERTH_SESSION_TIMEOUT_MS", "?")
        if applied.statefulset is Applied.CREATED:
            self.events.info(
                "Created",
                f"created StatefulSet {name} at {planned.replicas} replicas (OrderedReady, session timeout"
                f" {timeout} ms); the scaling step sizes it next",
            )
        elif applied.statefulset is Applied.UPDATED:
            self.events.info(
                "Updated",
                f"updated the pod template of StatefulSet {name} (session timeout {timeout} ms): its pods restart"
                " one at a time and rejoin as themselves, without a rebalance",
            )
        if applied.service is Applied.CREATED:
            self.events.info("Created", f"created headless Service {name}")
        elif applied.service is Applied.UPDATED:
            self.events.info("Updated", f"updated headless Service {name}")

    def _announce_waiting(self, waiting: str | None) -> None:
        if waiting is None:
            self.ctx.last_waiting.pop(self.uid, None)
        elif self.ctx.last_waiting.get(self.uid) != waiting:
            self.ctx.last_waiting[self.uid] = waiting
            self.events.info("Waiting", waiting)


def _root_cause(error: BaseException) -> str:
    """The innermost cause ("Cannot connect to host ..."): the outer layers only repeat the URL."""
    while error.__cause__ is not None:
        error = error.__cause__
    return str(error) or type(error).__name__


@dataclass(frozen=True, slots=True)
class _Planned:
    workload: PlannedWorkload
    hash: str
