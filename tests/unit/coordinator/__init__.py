"""Scenario and state-machine tests of the pure coordinator core (Kafka's classic group decision tables)."""
