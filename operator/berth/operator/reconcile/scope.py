"""What one pass over one fleet works with: the one value its steps take.

- :class:`Scope`: the ports and settings every pass shares (``reconcile.context``), the fleet as this pass knows it
  (its :class:`~berth.operator.reconcile.record.FleetRecord`) and what the operator remembers of it (its
  :class:`~berth.operator.reconcile.memory.FleetMemory`);
- ``reconcile.admission.Admitted``: a scope once the fleet is admitted, with its spec, its group and its workload.

Rules: a step takes a scope (or an admitted one) and at most three more parameters; a step reaches the world only
through ``scope.ports`` and remembers only through ``scope.memory``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from berth.operator.reconcile.context import Ports, Settings
from berth.operator.reconcile.memory import FleetMemory
from berth.operator.reconcile.record import FleetRecord


@dataclass(frozen=True, slots=True)
class Scope:
    ports: Ports
    settings: Settings
    record: FleetRecord
    memory: FleetMemory

    def now(self) -> datetime:
        return self.ports.now()

    def now_ms(self) -> int:
        return int(self.ports.now().timestamp() * 1000)
