"""``berth-coordinator``: the coordinator daemon's command line and wiring (``main``: flags, the store or the
replicated store opened, the HTTP adapter created, leadership, the run, ``copy-to-etcd``), on top of ``http``,
``store`` and ``core``; nothing in the product imports it."""
