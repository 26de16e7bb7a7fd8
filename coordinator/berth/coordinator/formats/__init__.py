"""Berth's documents, each declared once for the parts that may not import one another (docs/formats.md).

- ``journal``: the membership journal's event: written by the coordinator core and by the operator (its Kafka
  evidence), read by the pipeline;
- ``advice``: the session-timeout advice document (``advice.json``): written by the pipeline, read by the operator.

Rules: standard library only, and nothing of Berth (an import-linter contract, and a test that imports them in a
bare interpreter: ``python -S``), so any part may import them, the Spark image included.
"""
