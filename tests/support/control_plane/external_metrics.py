"""A stand-in for the metrics server an autoscaler's metric comes through (KEDA's metrics apiserver, or the
Prometheus adapter): ``external.metrics.k8s.io/v1beta1`` over HTTPS, registered with the real API server's
aggregator, serving a fleet's lag as the operator exports it on ``/metrics`` (``berth_operator_fleet_lag``).

The real parts around it: the API server proxies to it (an ``APIService`` and an ``ExternalName`` Service naming
localhost, which the aggregator resolves to ``https://localhost:<port>``), and the real HorizontalPodAutoscaler
controller in kube-controller-manager asks it for the metric. What it stands in for is only the adapter's lookup
(a query to Prometheus, or KEDA's scaler reading Kafka): here, one scrape of the operator's endpoint.

Metric ``berth_fleet_lag``, selected by the label ``fleet`` (the HPA's ``metric.selector``), in the namespace the
HPA asks about.
"""

from __future__ import annotations

import json
import re
import ssl
import threading
import urllib.parse
import urllib.request
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from support.certs import make_ca, make_server_cert
from support.kube import Kube

GROUP_VERSION = "external.metrics.k8s.io/v1beta1"
API_SERVICE = "v1beta1.external.metrics.k8s.io"
METRIC = "berth_fleet_lag"
SERVICE = "berth-external-metrics"


class ExternalMetrics:
    def __init__(self, operator_metrics_url: str, directory: Path) -> None:
        self.operator_metrics_url = operator_metrics_url
        ca = make_ca(directory / "ca", "external-metrics-ca")
        self.pair = make_server_cert(directory / "serving", ca, 1, "external-metrics")
        self.server: ThreadingHTTPServer | None = None
        self.asked: list[str] = []  # the metric paths the aggregator asked for

    @property
    def port(self) -> int:
        assert self.server is not None
        return int(self.server.server_address[1])

    def start(self) -> ExternalMetrics:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                status, body = outer.answer(self.path)
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(self.pair.cert), str(self.pair.key))
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        threading.Thread(target=self.server.serve_forever, name="external-metrics", daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    def register(self, kube: Kube, namespace: str) -> None:
        """The APIService and the Service it names, as a metrics adapter's chart installs them."""
        kube.apply(
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": SERVICE, "namespace": namespace},
                "spec": {"type": "ExternalName", "externalName": "localhost"},
            },
            {
                "apiVersion": "apiregistration.k8s.io/v1",
                "kind": "APIService",
                "metadata": {"name": API_SERVICE},
                "spec": {
                    "group": "external.metrics.k8s.io",
                    "version": "v1beta1",
                    "service": {"namespace": namespace, "name": SERVICE, "port": self.port},
                    "insecureSkipTLSVerify": True,
                    "groupPriorityMinimum": 100,
                    "versionPriority": 100,
                },
            },
        )

    def unregister(self, kube: Kube, namespace: str) -> None:
        kube.kubectl("delete", "apiservice", API_SERVICE, "--ignore-not-found")
        kube.kubectl("delete", "service", SERVICE, "-n", namespace, "--ignore-not-found")

    def answer(self, path: str) -> tuple[int, dict[str, Any]]:
        parts = urllib.parse.urlsplit(path)
        if parts.path.rstrip("/") == f"/apis/{GROUP_VERSION}":
            resource = {"name": METRIC, "namespaced": True, "kind": "ExternalMetricValueList", "verbs": ["get"]}
            return 200, {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": GROUP_VERSION,
                         "resources": [resource]}  # fmt: skip
        found = re.fullmatch(rf"/apis/{re.escape(GROUP_VERSION)}/namespaces/([^/]+)/([^/]+)", parts.path)
        if found is None or found.group(2) != METRIC:
            return 404, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404}
        self.asked.append(path)
        namespace = found.group(1)
        selector = urllib.parse.parse_qs(parts.query).get("labelSelector", [""])[0]
        fleet = dict(pair.split("=", 1) for pair in selector.split(",") if "=" in pair).get("fleet", "")
        value = self.fleet_lag(namespace, fleet)
        items = []
        if value is not None:
            items.append(
                {
                    "metricName": METRIC,
                    "metricLabels": {"fleet": fleet},
                    "timestamp": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                    "value": str(int(value)),
                }
            )
        return 200, {"kind": "ExternalMetricValueList", "apiVersion": GROUP_VERSION, "metadata": {}, "items": items}

    def fleet_lag(self, namespace: str, fleet: str) -> float | None:
        """``berth_operator_fleet_lag{namespace, fleet}`` as the operator exports it now."""
        with urllib.request.urlopen(self.operator_metrics_url, timeout=10) as answer:
            text = answer.read().decode()
        for line in text.splitlines():
            found = re.fullmatch(r"berth_operator_fleet_lag\{(.*)\} (\S+)", line)
            if found and dict(re.findall(r'(\w+)="([^"]*)"', found.group(1))) == {
                "namespace": namespace,
                "fleet": fleet,
            }:
                return float(found.group(2))
        return None
