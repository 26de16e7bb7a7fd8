"""A confluent-kafka (librdkafka) consumer configured entirely from the environment the Berth operator gives its pods.

The same BERTH_* variables as kafka_python_consumer.py, mapped onto librdkafka's properties: group.instance.id
from BERTH_GROUP_INSTANCE_ID, group.protocol from BERTH_KAFKA_GROUP_PROTOCOL (classic, or consumer: KIP-848, where
the operator sets the session timeout on the group and the client must not be given session.timeout.ms or
heartbeat.interval.ms), max.poll.interval.ms, and bootstrap.servers / security.protocol / sasl.* / ssl.* from
BERTH_KAFKA_* (a CA bundle and a client certificate as the files the operator mounts). KAFKA_TOPIC names the topic.

It prints one JSON line per assignment change (``assigned`` with everything it owns then, ``revoked`` with what it
gave up and what it still owns) and stops on SIGTERM without leaving the group (librdkafka sends no
LeaveGroup for a static member on close; on the consumer protocol it sends epoch -2 and keeps its partitions until
it is back). A fatal error (on the consumer protocol, UNRELEASED_INSTANCE_ID: the previous process of this pod
still holds the instance id) ends a librdkafka consumer for good: this program says so ({"event": "fatal"}) and
starts a new consumer after a backoff (1 s, doubling to 5 s until it is assigned again), so the pod recovers by
itself once the id is free, instead of staying Ready while consuming nothing.
"""

import json
import os
import signal
import sys
import time

from confluent_kafka import Consumer, KafkaError

env = os.environ
name = env.get("BERTH_GROUP_INSTANCE_ID", "consumer")
protocol = env.get("BERTH_KAFKA_GROUP_PROTOCOL", "classic")


def emit(event, **fields):
    print(json.dumps({"event": event, "name": name, "t": time.time(), **fields}), flush=True)


config = {
    "bootstrap.servers": env["BERTH_KAFKA_BOOTSTRAP_SERVERS"],
    "group.id": env["BERTH_GROUP_ID"],
    "group.protocol": protocol,
    "max.poll.interval.ms": int(env.get("BERTH_REBALANCE_TIMEOUT_MS", "300000")),
    "security.protocol": env.get("BERTH_KAFKA_SECURITY_PROTOCOL", "PLAINTEXT"),
    "auto.offset.reset": "earliest",
    "enable.auto.commit": True,
}
if protocol == "classic":  # on the consumer protocol these are the group's configs, which the operator sets
    config["session.timeout.ms"] = int(env.get("BERTH_SESSION_TIMEOUT_MS", "45000"))
    config["heartbeat.interval.ms"] = int(env.get("BERTH_HEARTBEAT_INTERVAL_MS", "3000"))
if env.get("BERTH_GROUP_INSTANCE_ID"):
    config["group.instance.id"] = env["BERTH_GROUP_INSTANCE_ID"]
if env.get("BERTH_KAFKA_SASL_MECHANISM"):
    config["sasl.mechanism"] = env["BERTH_KAFKA_SASL_MECHANISM"]
    config["sasl.username"] = env["BERTH_KAFKA_SASL_USERNAME"]
    config["sasl.password"] = env["BERTH_KAFKA_SASL_PASSWORD"]
if env.get("BERTH_KAFKA_SSL_CA_FILE"):
    config["ssl.ca.location"] = env["BERTH_KAFKA_SSL_CA_FILE"]
elif env.get("BERTH_KAFKA_SSL_CA_PEM"):
    config["ssl.ca.pem"] = env["BERTH_KAFKA_SSL_CA_PEM"]
if env.get("BERTH_KAFKA_SSL_CERT_FILE"):
    config["ssl.certificate.location"] = env["BERTH_KAFKA_SSL_CERT_FILE"]
    config["ssl.key.location"] = env["BERTH_KAFKA_SSL_KEY_FILE"]

stopping = False


def stop(signum, frame):
    global stopping
    stopping = True


owned = set()  # what this consumer owns now: the consumer protocol assigns and revokes incrementally


def on_assign(consumer, partitions):
    global backoff
    backoff = 1.0
    owned.update(f"{tp.topic}:{tp.partition}" for tp in partitions)
    emit("assigned", partitions=sorted(owned), added=sorted(f"{tp.topic}:{tp.partition}" for tp in partitions))


def on_revoke(consumer, partitions):
    owned.difference_update(f"{tp.topic}:{tp.partition}" for tp in partitions)
    emit("revoked", partitions=sorted(f"{tp.topic}:{tp.partition}" for tp in partitions), owned=sorted(owned))


def subscribed():
    consumer = Consumer(config)
    consumer.subscribe([env.get("KAFKA_TOPIC", "orders")], on_assign=on_assign, on_revoke=on_revoke)
    return consumer


signal.signal(signal.SIGTERM, stop)
signal.signal(signal.SIGINT, stop)
backoff = 1.0
consumer = subscribed()
while not stopping:
    message = consumer.poll(0.1)
    error = message.error() if message is not None else None
    if error is not None and (error.fatal() or error.code() == KafkaError._FATAL):
        emit("fatal", error=error.str())
        consumer.close()
        owned.clear()
        deadline = time.monotonic() + backoff
        while not stopping and time.monotonic() < deadline:
            time.sleep(0.1)
        backoff = min(backoff * 2, 5.0)
        consumer = subscribed()
consumer.close()
emit("exited")
sys.exit(0)
