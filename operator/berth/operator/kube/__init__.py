"""The operator's Kubernetes side beyond Kopf: identity, and the objects it reads and writes with the official client.

Rules: every client call runs in a worker thread (``asyncio.to_thread``) so the event loop never blocks; every call
names its API group and plural with literals or ``berth.operator.names`` constants, because tests/chart derives the
operator's RBAC rules from these calls.
"""
