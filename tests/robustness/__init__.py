"""Berth's guarantees checked the way etcd's robustness suite and Jepsen check theirs (issue 28).

A run (``run``) starts a real topology in network namespaces of its own (``topology``: the SQLite coordinator on a
loop-mounted disk, or replicas on a three-member etcd cluster), drives loads of recording clients against it
(``clients``: member-library members, raw protocol clients, retrying admin writers, offset committers), injects
faults picked from a printed seed (``faults``), heals, and reads everything back. Every client operation is
recorded with its invoke and completion times, request and answer (``history``); afterwards an offline checker
(``checker``) holds the history against deliberately simple sequential models (``models``), with a Wing-Gong
search for linearizability per key (``wgl``). ``campaign`` runs many seeds and keeps the record in
``benchmarks/results/robustness.json``. Nothing here imports the coordinator's core: the models are written from
docs/api.md, not from the code under test.
"""
