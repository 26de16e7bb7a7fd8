"""Kopf handlers, one module per resource the operator serves (today: ConsumerFleets), plus its activities.

Rules: handlers are thin. They translate Kopf's call into a reconciler call and its outcome into Kopf's terms
(return, ``TemporaryError`` with a backoff); every decision is made in ``berth.operator.reconcile`` and the
planners. Handlers are registered on a registry passed in, not Kopf's global one, so that each operator run (and
each test) gets its own settings, clients and timer interval.
"""
