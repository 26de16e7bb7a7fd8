"""The operator's adapters: what implements the ports (``berth.operator.ports``) on the world's libraries.

Built by the composition roots (``command.app``; ``local`` for berth-demo) and handed to the service as its ports;
never imported by the service (``reconcile``), the pure layers (``planners``, ``ports``, ``spec``) or the Kopf
handlers (import-linter's protected contracts: only the roots import this package).
"""
