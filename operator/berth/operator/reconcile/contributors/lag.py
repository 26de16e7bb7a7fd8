"""The lag contributor: a Kafka group's lag (``status.lag``, and the gauges), where the coordinator keeps a
partition log. A lag that cannot be read now is logged once (the fleet's memory keeps what was logged) and leaves
the last one in status.
"""

from __future__ import annotations

import logging

from berth.operator.planners.lag import LAG, lag_status
from berth.operator.ports import CoordinatorUnavailable
from berth.operator.reconcile.admission import Admitted
from berth.operator.reconcile.contributors.base import NOTHING, Contribution, Draft, Seen

logger = logging.getLogger("berth.operator.reconcile")


async def contribute(a: Admitted, seen: Seen, draft: Draft) -> Contribution:
    description, record = seen.description, a.record
    if not description.known:
        return NOTHING
    try:
        lag = await a.group.coordinator.group_lag(a.group.group_id, description)
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
