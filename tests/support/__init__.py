"""What the tests stand on (docs/testing.md maps the tiers), in folders by what each part stands in for:

- ``coordinators``: Berth's coordinator as real processes (``coordinator``: ``CoordinatorProcess``; ``ha_fixtures``:
  replicas on etcd), the clients tests talk to it with (``api``, ``rawhttp``), coordinators that misbehave on
  purpose (``hostile_endpoints``), and the operator's Kafka evidence without a pass (``evidence``);
- ``control_plane``: a real Kubernetes control plane (``kube_cluster``, ``kube_fixtures``, ``kube``: kubectl and
  helm as one identity each), the kubelet's part played for it (``fake_kubelet``; ``stage_controller``: kwok's job,
  pods Running and Ready on simulated nodes with no process each, for the scale benchmarks), the real operator as a
  process (``operator_process``) and one test's world on it (``fleet_stage``), an autoscaler's metrics server
  (``external_metrics``), the operator's /metrics read (``metrics_text``) and its RBAC needs read from its code
  (``rbac_scan``); the operator's replicas under leader faults (``leader_world``: on a private network of
  ``netlab``, ``leader_campaign``: the randomized runs, ``leader_history``: the checker);
- ``kafka_cluster``: a Kafka-protocol broker (``kafka_broker``: kfake, or a real cluster), a Strimzi-style
  authenticating listener in front of it (``kafka_auth_proxy``), real Kafka consumers (``kafka_consumers``), and the
  tier's fixtures and world (``kafka_fixtures``, ``kafka_stage``);
- ``network``: ports (``net``), certificates made with openssl (``certs``), a proxy a test can cut (``tcp_proxy``);
- ``real_node``: a real node on this machine (``node`` and the ``node_*`` modules: ``pytest -m node``);
- ``signals``: the signal lab (``signal_lab``): the operator's real pass over generated histories
  (``signal_histories``) of a simulated StatefulSet (``signal_fleet``) against Berth's coordinator
  (``signal_berth``) or a Kafka broker with real clients (``signal_kafka_rig``), and the oracle that checks what it
  said against the coordinator's journal or the broker's group (``signal_oracle``); one fleet's passes over the real
  Kafka port with real consumers as its pods' processes (``signal_kafka``);
- ``tiers``: whether a tier runs: a missing tool skips it with one line, a failure under ``CI=true`` (``ci``).

Every module is imported as ``support.<module>`` whatever its folder (this package's path holds the folders), so a
module can move between folders without its importers changing; module names are unique across the folders
(tests/test_layout.py).
"""

from pathlib import Path

#: The folders, each searched for ``support.<module>`` after this one.
FOLDERS = ("coordinators", "control_plane", "kafka_cluster", "network", "real_node", "signals", "tiers")

__path__ = [*__path__, *(str(Path(__file__).parent / folder) for folder in FOLDERS)]
