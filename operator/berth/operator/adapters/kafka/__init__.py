"""Kafka as a fleet's coordinator: the :class:`~berth.operator.ports.CoordinatorPort` on a Kafka cluster.

``wire`` makes the blocking kafka-python admin calls; ``port`` runs them on a worker thread per cluster connection
and maps their outcomes (and kafka-python's errors) onto the port's vocabulary. What a connection is made of
(bootstrap list, security, the fleet principal's credentials, never printed) is the pure
``planners.kafka_credentials.KafkaConnection``.
"""
