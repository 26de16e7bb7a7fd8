"""What the operator observes of groups on a coordinator that keeps no journal (Kafka), kept as evidence: each
describe of a fleet's group, compared with the last one (the fleet's memory keeps it), and the operator's own
removals from the group become journal events (``planners.evidence``), appended to the
:class:`~berth.operator.ports.EvidenceJournal` (a directory, ``evidence_files``, or a ConfigMap,
``kube.evidence_configmap``), which ``berth-analyze`` reads like the coordinator's journal.

Rules: an append that fails is logged and dropped (evidence is best effort, never a reason to stop a reconcile);
nothing but membership facts is written (no secrets); without a journal, a describe is still compared with the
last (the fleet's restarts are counted from it: ``contributors.evidence``) and a removal is not recorded.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from berth.operator.planners.evidence import EvidenceEvent, observe_group, removal_events
from berth.operator.planners.observations import GroupDescription, PodTimes
from berth.operator.ports import EvidenceJournal
from berth.operator.reconcile.admission import Admitted

logger = logging.getLogger("berth.operator.evidence")


async def observed(
    a: Admitted,
    description: GroupDescription,
    pods: Mapping[str, PodTimes] | None = None,
    session_timeout_ms: int | None = None,
) -> list[EvidenceEvent]:
    """One describe of the fleet's group, recorded under its key (``AdmittedGroup.evidence_key``), with the fleet's
    pods' times (``pods``, by name) for restart durations and the members' session timeout where known: the events
    it shows since the last one (appended where there is a journal; returned either way)."""
    memory = a.memory
    memory.evidence, events = observe_group(
        memory.evidence,
        description,
        now_ms=a.now_ms(),
        key=a.group.evidence_key,
        pods=pods,
        session_timeout_ms=session_timeout_ms,
    )
    await append(a.ports.evidence, events)
    return events


async def removed(a: Admitted, results: Mapping[str, str], *, everyone: bool) -> None:
    """The operator's removal from the fleet's group (a batch leave's ``results``), recorded."""
    if a.ports.evidence is None:
        return
    memory = a.memory
    memory.evidence, events = removal_events(
        memory.evidence, a.group.evidence_key, results, everyone=everyone, now_ms=a.now_ms()
    )
    await append(a.ports.evidence, events)


async def append(journal: EvidenceJournal | None, events: Sequence[EvidenceEvent]) -> None:
    """``events`` appended to ``journal``, best effort (a failure is logged)."""
    if not events or journal is None:
        return
    try:
        await journal.append(events)
    except Exception as error:  # best effort: evidence never stops a reconcile
        logger.warning("could not record %d evidence event(s): %s", len(events), error)
