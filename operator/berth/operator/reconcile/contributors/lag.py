"""The lag contributor: a Kafka group's lag (``status.lag``, and the gauges), where the coordinator keeps a
partition log; and the partitions known to exist (``FleetMemory.known_partitions``, read by ``contributors.stuck``):
those the lag read measured, or where the coordinator keeps no partition log (Berth's), the group's committed
partitions of the topics its members subscribe to (at most ``stuck_group.KNOWN_MAX``), read again only when the
group's membership changed (``stuck_group.membership``). A lag that cannot be read now is logged once (the fleet's
memory keeps what was logged) and leaves the last one in status.
"""

from __future__ import annotations

import logging

from berth.operator.planners.lag import LAG, lag_status
from berth.operator.planners.stuck_group import KNOWN_MAX, membership, subscribed_topics
from berth.operator.ports import CoordinatorUnavailable
from berth.operator.reconcile.admission import Admitted
from berth.operator.reconcile.contributors.base import NOTHING, Contribution, Draft, Seen

logger = logging.getLogger("berth.operator.reconcile")


async def contribute(a: Admitted, seen: Seen, draft: Draft) -> Contribution:
    description, record = seen.description, a.record
    if not description.known:
        return NOTHING
    coordinator, group_id = a.group.coordinator, a.group.group_id
    try:
        lag = await coordinator.group_lag(group_id, description)
        if lag is None and a.memory.known_at != (looked := membership(description)):
            # No partition log (Berth's coordinator): its committed offsets say which partitions exist, read again
            # only when the membership changed (no partition loses its owner otherwise).
            topics = subscribed_topics(description)
            a.memory.known_partitions = frozenset(await coordinator.committed_partitions(group_id, topics, KNOWN_MAX))
            a.memory.known_at = looked
    except CoordinatorUnavailable as error:
        if str(error) != a.memory.lag_problem:
            a.memory.lag_problem = str(error)
            logger.warning("fleet %s/%s: lag not read: %s", record.namespace, record.name, error)
        return NOTHING
    a.memory.lag_problem = None
    if lag is None:
        return NOTHING
    a.memory.known_partitions = frozenset(f"{p.topic}:{p.partition}" for p in lag.partitions)
    shown = lag_status(lag)
    if a.ports.metrics is not None:
        a.ports.metrics.lag(record.namespace, record.name, total=shown["total"], max_partition=shown["maxPartition"])
    return Contribution(patch={LAG: shown})
