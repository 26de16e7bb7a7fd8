"""A confluent-kafka (librdkafka) consumer configured entirely from the environment the Berth operator gives its pods.

The same BERTH_* variables as kafka_python_consumer.py, mapped onto librdkafka's properties: group.instance.id
from BERTH_GROUP_INSTANCE_ID, session.timeout.ms, heartbeat.interval.ms, max.poll.interval.ms, and
bootstrap.servers / security.protocol / sasl.* / ssl.ca.pem from BERTH_KAFKA_*. KAFKA_TOPIC names the topic. It
prints one JSON line per assignment and stops on SIGTERM without leaving the group (librdkafka sends no LeaveGroup
for a static member on close).
"""

import json
import os
import signal
import sys
import time

from confluent_kafka import Consumer

env = os.environ
name = env.get("BERTH_GROUP_INSTANCE_ID", "consumer")


def emit(event, **fields):
    print(json.dumps({"event": event, "name": name, "t": time.time(), **fields}), flush=True)


config = {
    "bootstrap.servers": env["BERTH_KAFKA_BOOTSTRAP_SERVERS"],
    "group.id": env["BERTH_GROUP_ID"],
    "session.timeout.ms": int(env.get("BERTH_SESSION_TIMEOUT_MS", "45000")),
    "heartbeat.interval.ms": int(env.get("BERTH_HEARTBEAT_INTERVAL_MS", "3000")),
    "max.poll.interval.ms": int(env.get("BERTH_REBALANCE_TIMEOUT_MS", "300000")),
    "security.protocol": env.get("BERTH_KAFKA_SECURITY_PROTOCOL", "PLAINTEXT"),
    "auto.offset.reset": "earliest",
    "enable.auto.commit": True,
}
if env.get("BERTH_GROUP_INSTANCE_ID"):
    config["group.instance.id"] = env["BERTH_GROUP_INSTANCE_ID"]
if env.get("BERTH_KAFKA_SASL_MECHANISM"):
    config["sasl.mechanism"] = env["BERTH_KAFKA_SASL_MECHANISM"]
    config["sasl.username"] = env["BERTH_KAFKA_SASL_USERNAME"]
    config["sasl.password"] = env["BERTH_KAFKA_SASL_PASSWORD"]
if env.get("BERTH_KAFKA_SSL_CA_PEM"):
    config["ssl.ca.pem"] = env["BERTH_KAFKA_SSL_CA_PEM"]

stopping = False


def stop(signum, frame):
    global stopping
    stopping = True


def on_assign(consumer, partitions):
    emit("assigned", partitions=sorted(f"{tp.topic}:{tp.partition}" for tp in partitions))


def on_revoke(consumer, partitions):
    emit("revoked", partitions=sorted(f"{tp.topic}:{tp.partition}" for tp in partitions))


signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGINT, stop)
consumer = Consumer(config)
consumer.subscribe([env.get("KAFKA_TOPIC", "orders")], on_assign=on_assign, on_revoke=on_revoke)
while not stopping:
    consumer.poll(0.1)
consumer.close()
emit("exited")
sys.exit(0)
