"""The knobs of the session-timeout advice rule (``advice`` applies it), apart so that the command line reads them
without importing Spark: ``berth-analyze --help`` and its errors answer even where the pipeline extra is missing.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AdviceSettings:
    """The knobs of the advice rule, defaults as in docs/formats.md."""

    percentile: float = 0.99
    safety_margin: float = 1.5
    heartbeat_interval_ms: int = 3000
    min_ms: int = 6000
    max_ms: int = 1_800_000
    confident_samples: int = 30

    def __post_init__(self) -> None:
        if not 0.0 < self.percentile <= 1.0:
            raise ValueError(f"percentile must be in (0, 1], got {self.percentile}")
        if self.safety_margin < 1.0:
            raise ValueError(f"safety margin must be at least 1, got {self.safety_margin}")
        if not 0 < self.min_ms <= self.max_ms:
            raise ValueError(f"need 0 < min ({self.min_ms}) <= max ({self.max_ms})")

    @property
    def percentile_label(self) -> str:
        """``p99`` for 0.99, ``p99.9`` for 0.999."""
        return f"p{round(self.percentile * 100, 6):g}"
