"""The reconcile service: what the operator does for each ConsumerFleet, as a short sequence of steps over ports.

Layers (held by import-linter contracts in pyproject.toml, described in docs/architecture.md): the Kopf handlers
(``handlers``) and the composition roots (``app``, ``local``) call in; this package calls out only through
``berth.operator.ports`` and decides only through the pure ``berth.operator.planners``. It imports no adapter
(``kube``, ``kafka``, ``coordinator_adapter``, ``coordinators``...), no Kopf, no Kubernetes or Kafka client and
nothing of the coordinator: adapters are built outside it and raise the ports' errors.

- ``fleet_pass``: one pass over one fleet, and a deletion's pass; ``context``: what every pass shares;
  ``record``: one fleet as a pass knows it;
- the steps, in pass order: ``admission`` (may the fleet act, on which coordinator, as which kind of group),
  ``sizing`` (the session timeout and the workload applied with it), ``scaling`` (plan and ``driver``),
  ``status`` (what the pass saw, mirrored into status, conditions, metrics and evidence);
- ``reconciler``: passes one at a time per fleet, converging, finalizing, and poked by ``journal_follower``;
- ``evidence_journal``: the evidence kept where a coordinator keeps no journal.
"""
