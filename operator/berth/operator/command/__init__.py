"""``berth-operator`` as a command: its flags (``options``, with the leader-election flags of
``adapters.leadership.leader_options``), its logging (``logs``), what the operator's commands share as programs
(``cli``: ``--version``, help, a closed pipe) and the composition root (``app``: every adapter built, Kopf run with
the handlers behind the leader's gate). ``berth.operator.main`` is the entry point."""
