"""The local/demo wing: ``berth-demo``, a fleet of member processes on one machine, and a coordinator process.

Nothing in the product (the operator's handlers, reconcile loop, adapters and planners) imports this package
(an import-linter contract); it drives the product's own reconcile loop (``FleetPass``) on local ports.
"""
