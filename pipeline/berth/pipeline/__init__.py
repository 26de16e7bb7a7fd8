"""Berth's journal analytics on Spark: rebalances, restart gaps and session-timeout advice."""
