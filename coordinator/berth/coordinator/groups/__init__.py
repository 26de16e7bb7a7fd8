"""``berth-groups``: the admin command line, with ``kafka-consumer-groups.sh``'s habits (docs/member-library.md):
``groups_cli`` (the command), ``groups_render`` (what it prints), ``groups_reset`` (offset resets planned),
``groups_exit`` (its exit codes), ``groups_kafka`` (``--bootstrap-server``: a Kafka cluster's groups, read through
``client.kafka_groups``). A program on the member library (``client``) and the protocol declarations, nothing of
the server."""
