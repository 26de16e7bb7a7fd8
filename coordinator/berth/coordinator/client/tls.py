"""How the member library, the admin client and ``berth-groups`` verify a coordinator served over HTTPS.

Owns ``verifying_context``. Rules: with a CA file, the coordinator's certificate must chain to that CA (and name
the host in the URL); without one, to the system's CAs. Verification is never switched off. A CA file that cannot
be read or parsed is a ``ConfigError`` naming where it came from (``BERTH_CA_FILE``, ``--ca-file``, ``ca_file``),
raised when the client is built, not at its first request.
"""

from __future__ import annotations

import ssl
from typing import Final

from berth.coordinator.client.errors import ConfigError

ENV_CA_FILE: Final = "BERTH_CA_FILE"


def verifying_context(ca_file: str | None, *, source: str = "ca_file") -> ssl.SSLContext | None:
    """An ``SSLContext`` trusting only ``ca_file``'s CAs, or None for the default (the system's CAs)."""
    if ca_file is None:
        return None
    try:
        return ssl.create_default_context(cafile=ca_file)
    except FileNotFoundError:
        raise ConfigError(source, f"names {ca_file!r}, which does not exist") from None
    except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError: not PEM, no certificate in it
        reason = getattr(exc, "reason", None) or getattr(exc, "strerror", None) or type(exc).__name__
        raise ConfigError(source, f"names {ca_file!r}, which is not a PEM file of CA certificates ({reason})") from None
