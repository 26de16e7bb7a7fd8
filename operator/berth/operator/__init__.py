"""Berth's Kubernetes operator for ConsumerFleet resources (Kopf), its pure planners and workload ports."""
