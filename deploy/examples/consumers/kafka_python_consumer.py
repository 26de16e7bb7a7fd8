"""A kafka-python (>= 3.0) consumer configured entirely from the environment the Berth operator gives its pods.

The operator injects BERTH_GROUP_ID, BERTH_GROUP_INSTANCE_ID (the pod name: the static member's identity),
BERTH_SESSION_TIMEOUT_MS, BERTH_HEARTBEAT_INTERVAL_MS, BERTH_REBALANCE_TIMEOUT_MS and BERTH_KAFKA_* (bootstrap
servers, security protocol, SASL mechanism and credentials, CA bundle and client certificate files). KAFKA_TOPIC
names the topic. It prints one JSON line per assignment ({"event": "assigned", "partitions": ["topic:p", ...]})
and stops on SIGTERM without leaving the group, as a static member should (the operator removes departed members
itself). kafka-python speaks the classic protocol only: a fleet declaring groupProtocol consumer is refused here
with one line, rather than joining with the wrong protocol.
"""

import json
import logging
import os
import signal
import ssl
import sys
import time

from kafka import KafkaConsumer
from kafka.consumer.subscription_state import ConsumerRebalanceListener

env = os.environ
name = env.get("BERTH_GROUP_INSTANCE_ID", "consumer")
# The client's own log on stderr (LOG_LEVEL=INFO or DEBUG to see its group protocol at work).
logging.basicConfig(level=env.get("LOG_LEVEL", "WARNING"), format="%(asctime)s %(name)s %(levelname)s %(message)s")


def emit(event, **fields):
    print(json.dumps({"event": event, "name": name, "t": time.time(), **fields}), flush=True)


class Report(ConsumerRebalanceListener):
    def on_partitions_revoked(self, revoked):
        emit("revoked", partitions=sorted(f"{tp.topic}:{tp.partition}" for tp in revoked))

    def on_partitions_assigned(self, assigned):
        emit("assigned", partitions=sorted(f"{tp.topic}:{tp.partition}" for tp in assigned))


if env.get("BERTH_KAFKA_GROUP_PROTOCOL", "classic") != "classic":
    sys.exit("kafka-python has no KIP-848 consumer protocol: give this fleet groupProtocol: classic")

config = {
    "bootstrap_servers": env["BERTH_KAFKA_BOOTSTRAP_SERVERS"].split(","),
    "group_id": env["BERTH_GROUP_ID"],
    "group_instance_id": env.get("BERTH_GROUP_INSTANCE_ID") or None,
    "session_timeout_ms": int(env.get("BERTH_SESSION_TIMEOUT_MS", "45000")),
    "heartbeat_interval_ms": int(env.get("BERTH_HEARTBEAT_INTERVAL_MS", "3000")),
    "max_poll_interval_ms": int(env.get("BERTH_REBALANCE_TIMEOUT_MS", "300000")),
    "security_protocol": env.get("BERTH_KAFKA_SECURITY_PROTOCOL", "PLAINTEXT"),
    "enable_auto_commit": True,
    "auto_offset_reset": "earliest",
}
if env.get("BERTH_KAFKA_SASL_MECHANISM"):
    config["sasl_mechanism"] = env["BERTH_KAFKA_SASL_MECHANISM"]
    config["sasl_plain_username"] = env["BERTH_KAFKA_SASL_USERNAME"]
    config["sasl_plain_password"] = env["BERTH_KAFKA_SASL_PASSWORD"]
if env.get("BERTH_KAFKA_SSL_CA_FILE") or env.get("BERTH_KAFKA_SSL_CA_PEM"):
    context = ssl.create_default_context(
        cafile=env.get("BERTH_KAFKA_SSL_CA_FILE") or None,
        cadata=None if env.get("BERTH_KAFKA_SSL_CA_FILE") else env["BERTH_KAFKA_SSL_CA_PEM"],
    )
    if env.get("BERTH_KAFKA_SSL_CERT_FILE"):  # mutual TLS: the certificate and key the operator mounts
        context.load_cert_chain(env["BERTH_KAFKA_SSL_CERT_FILE"], env["BERTH_KAFKA_SSL_KEY_FILE"])
    config["ssl_context"] = context

stopping = False


def stop(signum, frame):
    global stopping
    stopping = True


signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGINT, stop)
consumer = KafkaConsumer(**config)
topic = env.get("KAFKA_TOPIC", "orders")
consumer.subscribe([topic], listener=Report())
# Have the subscribed topic's metadata before the first poll joins the group. kafka-python (3.0) has no KIP-814
# SkipAssignment: a restarted static member that is the group's leader assigns again as it joins, and if it had no
# metadata then, the metadata that arrives a moment later looks like a change and it asks for a rebalance, which is
# exactly what static membership is there to avoid.
while topic not in consumer.topics() and not stopping:
    time.sleep(0.1)
while not stopping:
    consumer.poll(timeout_ms=100)
consumer.close(autocommit=True)  # a static member does not send LeaveGroup on close (KIP-345)
emit("exited")
sys.exit(0)
