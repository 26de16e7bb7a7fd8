"""Kafka as a fleet's coordinator: the :class:`~berth.operator.ports.CoordinatorPort` on a Kafka cluster.

``wire`` makes the blocking kafka-python admin calls (the only module that imports kafka-python); ``port`` runs
them on a worker thread per cluster connection and maps their outcomes onto the port; ``connection`` holds what a
connection is made of (bootstrap list, security, the fleet principal's credentials, never printed).
"""
