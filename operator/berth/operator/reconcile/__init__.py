"""What the operator does for each ConsumerFleet, between Kopf's handlers and the pure planners.

Rules: this package decides the order of calls and what becomes status, Events and logs; the decisions themselves
come from ``berth.operator.planners``; Kubernetes is reached through ``berth.operator.kube`` and the coordinator
through the ports (``berth.operator.ports``). Nothing here imports Kopf except the Event sink.
"""
