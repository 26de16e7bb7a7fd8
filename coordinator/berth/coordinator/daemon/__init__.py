"""What Berth's two daemons, ``berth-coordinator`` and ``berth-operator``, share as programs: one convention for
their configuration and their logs, implemented once.

- ``environment``: every flag ``--some-flag`` may be given as ``BERTH_SOME_FLAG`` instead (the flag wins).
- ``logs``: ``--log-format text|json`` and ``--log-level``, one JSON shape for both daemons' lines.

Standard library only (an import-linter contract): the coordinator's server and the operator both import it, and it
imports neither.
"""
