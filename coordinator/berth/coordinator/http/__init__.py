"""The aiohttp adapter: routes, JSON validation, auth, long-polls, timers, metrics and the CLI.

``create_app(config, clock, core, leadership, journal)`` builds the application over a store's terms of leadership
(``leadership``: the SQLite store's one term, or ``replicas``' etcd election); ``main`` is the ``berth-coordinator``
command.
Everything protocol-related is decided by ``berth.coordinator.core``; this package only translates.
"""
