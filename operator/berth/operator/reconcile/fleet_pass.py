"""One reconcile pass over one ConsumerFleet, from a fresh read of it, as a short sequence of steps over ports.

The pass is the one reconcile loop's body: the operator runs it on Kubernetes (the StatefulSet workload, the
status subresource, Events), ``berth-demo`` on local processes with status in a dict, and both on Berth's
coordinator or a Kafka cluster. :meth:`FleetPass.run`:

A fleet paused by its ``berth.dev/paused`` annotation (``planners.pause``) gets only its Paused condition; then:

1. admission (``reconcile.admission``): the fleet admitted before anything is sent anywhere, the coordinator's
   port, its bounds, the group's kind and, where the kind records owners, the group claimed; from then on the
   steps take the admitted fleet (``admission.Admitted``: the pass's scope with the fleet, its group, its
   workload);
2. sizing (``reconcile.sizing``): the session timeout (on a consumer-protocol group, set as the group's config),
   and the workload applied with it;
3. scaling (``reconcile.scaling``): the group looked at again (its kind decided again: a group may convert between
   protocols), observe -> plan -> execute, status written through the API after every step;
4. status (``reconcile.status``): a fold over the status contributors (``reconcile.contributors``: one per
   feature: members, restarts, lag, volume claims, pause, ownership, Kafka evidence, the workload and the group
   ...) into one status write.

However a pass ends, a fleet it did not leave waiting for a turn to roll is out of that line (``reconcile.rolls``).
What a pass says goes to its fleet's Events sink, flushed once when the pass ends however it ends (Kubernetes
Events: what one pass said is posted as at most one Event per type, ``planners.announcements.coalesced``).

Every step may end the pass (``reconcile.endings``): a :class:`~berth.operator.planners.fleet_status.Refusal` (or
``GroupOwned``) becomes SpecValid=False and a Warning Event; a coordinator that cannot be asked is recorded
(CoordinatorReachable=False) and re-raised, and nothing after the failed call runs, so nothing is recorded as
done; a failed API call is a Warning Event and :class:`RetryLater`. :meth:`FleetPass.finalize` is the deletion's
pass: it sends the leave, the deletion or the release only for a group recorded as this fleet's (by the
coordinator, or in the operator's records where the coordinator keeps none), nothing at all for another fleet's,
and in every case releases each claim the fleet's status records (``reconcile.ownership.release_all``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Mapping
from dataclasses import replace
from typing import Any, TypeVar

from berth.operator.planners import announcements
from berth.operator.planners.advice import advice_key
from berth.operator.planners.coordinator_kind import UnmanagedGroup
from berth.operator.planners.fleet_status import Refusal
from berth.operator.planners.observations import GroupDescription, GroupOwnerRef
from berth.operator.planners.ownership import OwnedGroup, group_owned_message, refusal_reason
from berth.operator.planners.pause import is_paused
from berth.operator.ports import ApiCallFailed, ClaimsIndex, CoordinatorUnavailable, GroupOwned
from berth.operator.reconcile import admission, endings, ownership, rolls, scaling, sizing, status
from berth.operator.reconcile.admission import Admitted
from berth.operator.reconcile.context import PassContext, PassResult, RetryLater
from berth.operator.reconcile.contributors.base import Seen
from berth.operator.reconcile.contributors.pause import paused
from berth.operator.reconcile.driver import GroupStillHasMembers
from berth.operator.reconcile.memory import FleetMemory
from berth.operator.reconcile.record import FleetRecord
from berth.operator.reconcile.scope import Scope

logger = logging.getLogger("berth.operator.reconcile")

__all__ = ["FleetPass", "PassContext", "PassResult", "RetryLater"]

T = TypeVar("T")


class FleetPass:
    def __init__(self, context: PassContext, body: Mapping[str, Any], claims: ClaimsIndex, memory: FleetMemory) -> None:
        record = FleetRecord(context.ports, body)
        memory.uid = record.uid
        self.scope = Scope(context.ports, context.settings, record, memory)
        self.claims = claims

    async def run(self) -> PassResult:
        """One pass: admit, size, scale, mirror (the module docstring); what the fleet still waits for."""
        try:
            return await self._reporting_failures(self._steps())
        finally:
            rolls.pass_ended(self.scope)
            await self._flush_deferred()
            self.scope.record.events.flush()

    async def finalize(self) -> str | None:
        """One step of the deletion: None once the fleet may be released, else what it still waits for."""
        try:
            return await self._reporting_failures(self._finalize())
        finally:
            rolls.pass_ended(self.scope)
            self.scope.record.events.flush()

    async def _flush_deferred(self) -> None:
        """What the pass deferred (``FleetRecord.defer``: the session timeout it applied) written however the pass
        ended, so a pass that fails after sizing does not leave the next one without the timeout its pods have."""
        record = self.scope.record
        try:
            await record.flush()
        except ApiCallFailed as error:
            logger.warning("fleet %s/%s: status not written: %s", record.namespace, record.name, error)

    async def _reporting_failures(self, step: Awaitable[T]) -> T:
        """``step``, with an unreachable coordinator recorded (and re-raised) and a failed API call reported."""
        try:
            return await step
        except CoordinatorUnavailable as error:
            await endings.record_unreachable(self.scope, error)
            raise
        except ApiCallFailed as error:
            self.scope.record.events.warning("KubernetesApiError", f"a Kubernetes API call failed: {error}")
            raise RetryLater(str(error)) from error

    async def _steps(self) -> PassResult:
        scope = self.scope
        if is_paused(scope.record.body):
            return await paused(scope)
        admitted = admission.admit_fleet(scope, self.claims)
        if isinstance(admitted, Refusal):
            return await endings.refuse(scope, admitted)
        fleet, target = admitted
        try:
            connected = await admission.connect(scope, fleet, target)
            a, bounds = await admission.admit_group(scope, fleet, target, connected)
            key = advice_key(target, fleet.spec.group_id, scope.settings.defaults)
            sized = await sizing.size_and_apply(a, bounds, advice_key=key)
            description, kind = await a.group.look()
            a = replace(a, group=replace(a.group, kind=kind))
            plan = await scaling.scale(a, sized.view, description, deleting=False)
            mirrored = await status.mirror(a, Seen(sized.view, description, plan, sized))
            waiting = mirrored.waiting or _claims_waiting(scope.record)
            return replace(mirrored, waiting=waiting, advised_by=key, again_at=scope.record.again_at)
        except GroupOwned as owned:
            message = group_owned_message(
                fleet.spec.group_id,
                str(target),
                owned.owner,
                adopt_group=fleet.spec.coordinator.adopt_group,
                me=GroupOwnerRef(fleet.namespace, fleet.name, scope.record.uid),
            )
            return await endings.refuse(scope, Refusal(refusal_reason(owned.owner), message))
        except Refusal as refusal:
            return await endings.refuse(scope, refusal)

    async def _finalize(self) -> str | None:
        scope = self.scope
        record = scope.record
        admitted = admission.admit_fleet(scope, self.claims)
        if isinstance(admitted, Refusal):
            await ownership.release_all(scope)
            record.events.info("Released", admitted.release)
            return None
        fleet, target = admitted
        workload = scope.ports.workload_for(fleet)
        view = await workload.observe()
        if (
            view.observation.replicas is None
            and not record.status.get("departing")
            and (record.status.get("expectedMembers") is None)
        ):
            # No StatefulSet was ever created, so no member joined and nothing was pre-registered.
            await ownership.release_all(scope)
            record.events.info("Released", "nothing was created for this fleet")
            return None
        current = OwnedGroup(target.identity, fleet.spec.group_id)
        try:
            connected = await admission.connect(scope, fleet, target)
            group, description = await admission.look_up_group(connected, fleet, target)
            a = Admitted(scope.ports, scope.settings, record, scope.memory, fleet, group, workload)
            owner = await self._owner(a, description, current)
            if owner is None or owner.uid != record.uid:
                # Never claimed (refused), or another fleet's: its members, offsets and owner are not ours to touch.
                await ownership.release_all(scope)
                record.events.info("Released", announcements.left_untouched(fleet, group.where, owner))
                return None
            plan = await scaling.scale(a, view, description, deleting=True)
        except GroupOwned as owned:
            await ownership.release_all(scope)
            record.events.info("Released", announcements.left_untouched(fleet, str(target), owned.owner))
            return None
        except UnmanagedGroup as unmanaged:
            await ownership.release_all(scope)
            record.events.warning(unmanaged.reason, f"{unmanaged.message}: releasing the fleet")
            return None
        except Refusal as refusal:
            record.events.warning(refusal.reason, f"{refusal.message}; the fleet is kept until that is fixed")
            raise RetryLater(refusal.message) from refusal
        except GroupStillHasMembers as error:
            record.events.warning("GroupNotEmpty", str(error))
            raise RetryLater(str(error)) from error
        if plan.done:
            await ownership.release_all(scope, also=current)
            said = announcements.finalized(fleet, plan, a.group.kind, created=scaling.kept_or_created(a))
            record.events.info("Finalized", said)
            return None
        return plan.waiting

    async def _owner(self, a: Admitted, description: GroupDescription, current: OwnedGroup) -> GroupOwnerRef | None:
        """Who the group is recorded as: by the coordinator where it records owners, else in the operator's records
        (no records kept: nobody's, so nothing is touched)."""
        if a.group.kind.records_owners:
            return description.owner
        if a.ports.records is None:
            return None
        return await a.ports.records.owner(current.coordinator, current.group_id)


def _claims_waiting(record: FleetRecord) -> str | None:
    """What a converged pass still waits for: the claims a ``groupId`` edit left (their members not gone yet)."""
    if not record.claims_kept:
        return None
    kept = ", ".join(record.claims_kept)
    return f"the claim on group {kept} is released once the fleet's members are gone from it"
