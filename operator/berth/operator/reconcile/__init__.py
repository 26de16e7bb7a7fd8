"""The reconcile service: what the operator does for each ConsumerFleet, as a short sequence of steps over ports.

Layers (held by import-linter contracts in pyproject.toml, described in docs/architecture.md): the Kopf handlers
(``handlers``) and the composition roots (``command.app``, ``local``) call in; this package calls out only through
``berth.operator.ports`` and decides only through the pure ``berth.operator.planners``. It imports no adapter
(``adapters``: ``kube``, ``kafka``, the coordinator ports...), no Kopf, no Kubernetes or Kafka client and
nothing of the coordinator: adapters are built outside it and raise the ports' errors.

- ``fleet_pass``: one pass over one fleet, and a deletion's pass;
- what a pass works with: ``context`` (the ports and the settings every pass shares, frozen), ``memory`` (what the
  operator remembers of one fleet between its passes: the only memory here), ``record`` (one fleet as a pass knows
  it, and its status writes), ``scope`` (the one value the steps take: all of these together; ``admission.Admitted``
  once the fleet is admitted, with its group, ``group``, and its workload);
- the steps, in pass order: ``admission`` (may the fleet act, on which coordinator, as which kind of group; the
  claims: ``ownership``), ``sizing`` (the session timeout and the workload applied with it), ``scaling`` (plan and
  ``driver``), ``status`` (a fold over ``contributors``, one per feature, into one status write); the other endings
  of a pass: ``endings`` (a refusal, an unreachable coordinator);
- ``reconciler``: passes one at a time per fleet from a work queue (``queue``), converging, finalizing, keeping each
  fleet's memory, and poked by ``journal_follower``;
- ``evidence_journal``: the evidence kept where a coordinator keeps no journal.
"""
