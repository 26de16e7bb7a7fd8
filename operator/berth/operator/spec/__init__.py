"""The ConsumerFleet resource as the operator reads it: pure, the lowest layer of the operator.

- ``declaration``: the spec declared once (msgspec Structs: every field's name, type, default, enum and bounds),
  walked with the CRD's schema by tests/operator/unit/test_spec_declaration.py;
- ``checks``: the decoding errors, worded for people, and the CRD's CEL rules;
- ``stateful``: the per-pod volumes of a stateful fleet;
- ``fleet``: what the operator makes of a fleet (``Fleet``, ``parse_fleet``) and its own defaults;
- ``names``: the resource's API group, version, plural and the operator's annotation prefix and finalizer.
"""
