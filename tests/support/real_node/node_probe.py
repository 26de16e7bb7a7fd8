"""The first join answered through a Service, timed from inside the node's network namespace.

``python -m support.node_probe URL TOKEN GROUP [CA_FILE]`` (an https URL is verified against CA_FILE's chain, not its
name: the ClusterIP is not a name the certificate carries; run with ``Node.network.inside``, so the ClusterIP in
URL goes through kube-proxy's rules as a pod's connection does) reads one line per measurement from stdin: a
``time.monotonic()`` reading of the test (the clock is the machine's, shared by every process and namespace),
taken when it inflicted a failure. It then sends a join of a new member to GROUP (``api_version`` 4, so the
answer is MEMBER_ID_REQUIRED) on a new connection every 50 ms, each given 1 s, first until one is not answered
(at once after a kill; a deleted pod's replica serves until the kubelet has stopped it), then until one is answered
again, and writes one line: the seconds from that reading to the answer. The probe starts before the failure, so
its own start-up costs the measurement nothing.
"""

from __future__ import annotations

import json
import ssl
import sys
import time
import urllib.error
import urllib.request

EVERY_S = 0.05
ATTEMPT_TIMEOUT_S = 1.0


def answered(url: str, token: str, group: str, tls: ssl.SSLContext | None = None) -> bool:
    body = {
        "member_id": "",
        "session_timeout_ms": 10_000,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": ""}],
        "api_version": 4,
    }
    request = urllib.request.Request(
        f"{url}/v1/groups/{group}/join",
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json", "Connection": "close"},
    )
    try:
        with urllib.request.urlopen(request, timeout=ATTEMPT_TIMEOUT_S, context=tls) as answer:
            return bool(json.loads(answer.read()).get("error") == "MEMBER_ID_REQUIRED")
    except (OSError, ValueError):  # refused, reset, timed out, 5xx (HTTPError), not JSON
        return False


def main(argv: list[str]) -> int:
    url, token, group, *ca_file = argv
    tls = None
    if ca_file:
        tls = ssl.create_default_context(cafile=ca_file[0])
        tls.check_hostname = False
    print("ready", flush=True)
    for line in sys.stdin:
        since = float(line)
        while answered(url, token, group, tls):
            time.sleep(EVERY_S)
        while not answered(url, token, group, tls):
            time.sleep(EVERY_S)
        print(f"{time.monotonic() - since:.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
