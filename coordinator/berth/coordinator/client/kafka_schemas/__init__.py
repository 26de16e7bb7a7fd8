"""Kafka protocol messages kafka-python (3.0) does not declare, in its JSON schema format: KIP-848's
ConsumerGroupDescribe (API key 69, versions 0-1), written from the protocol's published message layout."""
