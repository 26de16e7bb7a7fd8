"""The status contributors: one module per feature, each returning its piece of the status a pass writes at its
end (``contributors.base``: the interface and its rules; ``reconcile.status``: the fold, and their order).

- ``evidence``: what a describe shows of a group whose coordinator keeps no journal (Kafka), as evidence and as
  restarts for ``restarts``;
- ``kind``: the conditions the coordinator's kind and the group's protocol add; ``session_timeout``: whether the
  coordinator's maximum covers what the evidence asks for;
- ``members`` (Kafka): instance ids held by members that are not their pods' processes, shown and released;
- ``ownership``: adopting a group in use, and members the fleet did not create;
- ``pause``: a fleet resumed (and the paused fleet's own ending);
- ``lag``: a Kafka group's lag;
- ``workload``: the workload and the group as seen, Ready and SpecValid, the coordinator answering again;
- ``rebalances``: the rebalances the last scale-down cost, once the group settled;
- ``restarts``: static restarts and rolls counted, one Event per burst;
- ``volume_claims``: claims of pods gone that are kept, told once a scale-down is over;
- ``stuck``: partitions nobody owns, or Ready pods idle while others own several, for longer than a threshold.

A new feature adds a module here and one line to ``reconcile.status.CONTRIBUTORS``.
"""
