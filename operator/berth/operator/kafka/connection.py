"""What one Kafka admin connection is made of, and how it is described without its secrets.

Rules: the password and the CA bundle are kept out of ``repr`` and every message; ``principal`` says whose
credentials these are in words ("the credentials in Secret team-a/orders-kafka", "no credentials"), which is
what conditions and Events name instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class KafkaConnection:
    bootstrap_servers: str  # canonical, comma-separated
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    ca_pem: str | None = field(default=None, repr=False)
    principal: str = "no credentials"

    @property
    def endpoint(self) -> str:
        return f"kafka://{self.bootstrap_servers}"
