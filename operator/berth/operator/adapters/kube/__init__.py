"""The operator's Kubernetes adapters: identity, the objects it reads and writes with the official client, and the
Events it posts through Kopf. Each implements a port (``berth.operator.ports``); ``command.app`` builds them.

Rules: every client call runs in a worker thread (``asyncio.to_thread``) so the event loop never blocks; every call
names its API group and plural with literals or ``berth.operator.spec.names`` constants, because tests/chart derives the
operator's RBAC rules from these calls; no ``ApiException`` leaves a port method (``calls.port_errors``).
"""
