"""The aiohttp adapter: routes, JSON validation, auth, long-polls, timers, metrics and the CLI.

``create_app(config, clock, store)`` builds the application; ``main`` is the ``berth-coordinator`` command.
Everything protocol-related is decided by ``berth.coordinator.core``; this package only translates.
"""
