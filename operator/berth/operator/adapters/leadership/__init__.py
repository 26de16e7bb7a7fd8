"""Leader election: the elector and the gate every write passes (``leader``), the coordinator ports behind the gate
(``gated``), and the leader-election flags (``leader_options``)."""
