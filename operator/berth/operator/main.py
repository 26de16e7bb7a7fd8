"""``berth-operator``: parse the flags, set up logging, say what the operator runs with, and run it.

Rules: a bad flag, an unreadable token file, no Kubernetes credentials or a port of its own already taken (a second
operator on the node) is one line on stderr and exit status 2, never a traceback;
the start-up log says what is watched, which coordinator and which options are in force (never the token);
SIGTERM and SIGINT stop the operator gracefully (``command.app.Stopping``: the leader's Lease released at once, then
Kopf and the passes wound down, for at most 5 s with leader election).
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import socket
import sys
from collections.abc import Sequence

from berth.operator.adapters.kube.identity import KubeIdentityError, load_identity
from berth.operator.command.app import run_operator
from berth.operator.command.cli import quiet_on_closed_pipe
from berth.operator.command.logs import configure_logging
from berth.operator.command.options import OptionsError, parse_options

logger = logging.getLogger("berth.operator")


def main(argv: Sequence[str] | None = None) -> int:
    return quiet_on_closed_pipe(lambda: run(argv))


def run(argv: Sequence[str] | None) -> int:
    try:
        options = parse_options(sys.argv[1:] if argv is None else argv, os.environ)
        identity = load_identity()
        taken = ports_taken({"--metrics-port": options.metrics_port, "--liveness-port": options.liveness_port})
    except (OptionsError, KubeIdentityError) as error:
        return fail(str(error))
    if taken:
        return fail(taken)
    configure_logging(options.log_format, options.log_level)
    logger.info("berth-operator starting; Kubernetes identity: %s (%s)", identity.source, identity.configuration.host)
    for line in options.describe():
        logger.info(line)
    try:
        asyncio.run(run_operator(options, identity=identity))
    except OSError as error:
        if error.errno != errno.EADDRINUSE:
            raise
        return fail(f"a port of the operator's was taken as it started ({error.strerror}): {_PORT_HINT}")
    return 0


_PORT_HINT = "another operator on this node? give this one other ports (0 turns an endpoint off)"


def fail(message: str) -> int:
    print(f"berth-operator: error: {message}", file=sys.stderr)
    return 2


def ports_taken(ports: dict[str, int], host: str = "0.0.0.0") -> str | None:
    """Why the operator cannot listen where its flags say (None: it can): checked before Kopf starts, so a taken
    port is one line, not a traceback from the server that would have bound it."""
    for flag, port in ports.items():
        if not port:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers bind: TIME_WAIT is no bar
            try:
                probe.bind((host, port))
            except OSError as error:
                return f"{flag} {port}: cannot listen on port {port} ({error.strerror}): {_PORT_HINT}"
    return None


if __name__ == "__main__":
    sys.exit(main())
