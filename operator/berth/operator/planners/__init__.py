"""Pure planners of the ConsumerFleet operator.

Each planner takes the fleet, what was observed and the time as parameters and returns a decision (manifests,
a session timeout, ordered scaling actions, a status block). None of them calls Kubernetes, the coordinator or the
clock, and none uses asyncio: the Kopf handlers and the driver execute the decisions through ``berth.operator.ports``.
"""
