"""The JAAS line Kafka's clients take as ``sasl.jaas.config``
(``org.apache.kafka.common.security.scram.ScramLoginModule required username="orders" password="...";``), read in
one place for the operator (a Strimzi KafkaUser Secret holds one) and ``berth-groups`` (``--command-config``).

Rules: pure, standard library only; a value is a double-quoted string with backslash escapes; a key that is not
there is None (never guessed from elsewhere in the line).
"""

from __future__ import annotations

import re

_UNESCAPE = re.compile(r"\\(.)")


def jaas_value(jaas_config: str | None, key: str) -> str | None:
    """The value of ``key="..."`` in a JAAS line; None when the line has none."""
    if not jaas_config:
        return None
    found = re.search(rf'(?:^|\s){re.escape(key)}\s*=\s*"((?:[^"\\]|\\.)*)"', jaas_config)
    return _UNESCAPE.sub(r"\1", found.group(1)) if found else None
