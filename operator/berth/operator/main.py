"""``berth-operator``: parse the flags, set up logging, say what the operator runs with, and run it.

Rules: a bad flag, an unreadable token file or no Kubernetes credentials is one line on stderr and exit status 2;
the start-up log says what is watched, which coordinator and which options are in force (never the token);
SIGTERM and SIGINT stop the operator gracefully (Kopf handles them).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections.abc import Sequence

from berth.operator.app import run_operator
from berth.operator.cli import quiet_on_closed_pipe
from berth.operator.kube.identity import KubeIdentityError, load_identity
from berth.operator.logs import configure_logging
from berth.operator.options import OptionsError, parse_options

logger = logging.getLogger("berth.operator")


def main(argv: Sequence[str] | None = None) -> int:
    return quiet_on_closed_pipe(lambda: run(argv))


def run(argv: Sequence[str] | None) -> int:
    try:
        options = parse_options(sys.argv[1:] if argv is None else argv, os.environ)
        identity = load_identity()
    except (OptionsError, KubeIdentityError) as error:
        print(f"berth-operator: error: {error}", file=sys.stderr)
        return 2
    configure_logging(options.log_format)
    logger.info("berth-operator starting; Kubernetes identity: %s (%s)", identity.source, identity.configuration.host)
    for line in options.describe():
        logger.info(line)
    asyncio.run(run_operator(options, identity=identity))
    return 0


if __name__ == "__main__":
    sys.exit(main())
