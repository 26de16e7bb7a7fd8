"""Berth's group coordinator: Kafka's classic group protocol (KIP-345/394/814) over HTTP/JSON.

- ``protocol``: wire constants shared by the server and the member library (error codes, API versions).
- ``core``: the pure, clock-injected group state machine.
- ``store``: SQLite persistence with group commit.
- ``http``: the aiohttp adapter and the ``berth-coordinator`` command.
- ``client``: the asyncio member library and admin client that consumer pods and the operator use.
"""
