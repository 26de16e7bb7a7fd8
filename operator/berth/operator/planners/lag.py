"""A Kafka fleet's lag in its status: ``status.lag`` (the ``Lag`` column of ``kubectl get cf``), from the group's
committed offsets and its partitions' log end offsets (``GroupLag``, read by the Kafka port).

Rules: pure; ``total`` is the sum over the partitions with a commit (a partition without one has no lag to speak of,
as ``kafka-consumer-groups.sh`` shows "-"); ``byPartition`` lists the :data:`SHOWN` most lagging partitions (status
stays small however many partitions a topic has; ``berth-groups`` shows them all), each with the member that owns
it; ``maxPartition`` is the largest one's lag. A coordinator without partition logs (Berth's) has no lag block.
"""

from __future__ import annotations

from typing import Any

from berth.operator.planners.observations import GroupLag

LAG = "lag"
#: How many partitions status names (the most lagging first).
SHOWN = 20


def lag_status(lag: GroupLag) -> dict[str, Any]:
    measured = sorted(lag.measured, key=lambda p: (-(p.lag or 0), p.topic, p.partition))
    return {
        "total": lag.total,
        "partitions": len(measured),
        "maxPartition": measured[0].lag if measured else 0,
        "byPartition": [
            {"partition": p.name, "lag": p.lag, **({"owner": p.owner} if p.owner else {})} for p in measured[:SHOWN]
        ],
    }
