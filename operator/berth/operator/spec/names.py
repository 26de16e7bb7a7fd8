"""The names the operator uses on the Kubernetes API: the ConsumerFleet resource, its finalizer and annotations.

Rules: plain string constants only, so that tests/chart's RBAC scanner (which reads the code with ``ast``) can
resolve every API group and plural the operator touches; nothing here may be computed.
"""

from __future__ import annotations

#: The ConsumerFleet custom resource (deploy/crds/consumerfleets.berth.dev.yaml).
GROUP = "berth.dev"
VERSION = "v1alpha1"
PLURAL = "consumerfleets"

#: Added by Kopf before the first handler runs; removed once the deletion handler has left and deleted the group.
FINALIZER = "berth.dev/finalizer"
#: Prefix of Kopf's bookkeeping annotations (handler progress, the last handled spec) on each fleet.
ANNOTATION_PREFIX = "berth.dev"
#: On the StatefulSet and Service: a hash of what the operator last applied, so an unchanged plan costs no write.
APPLIED_HASH_ANNOTATION = "berth.dev/applied-hash"
#: On the StatefulSet: a hash of the pod template the operator last applied, so a pass tells a change that rolls the
#: pods (paced: ``planners.roll_pacing``) from one that does not.
TEMPLATE_HASH_ANNOTATION = "berth.dev/template-hash"
#: The Events' reporting component (`kubectl describe` shows it in the "From" column).
COMPONENT = "berth-operator"
#: On the StatefulSet: a hash of the claim templates it was created with (Kubernetes never lets them change).
CLAIM_TEMPLATES_HASH_ANNOTATION = "berth.dev/claim-templates-hash"
#: On a ConsumerFleet: "true" pauses reconciling it (planners.pause), as Strimzi's strimzi.io/pause-reconciliation
#: and KEDA's autoscaling.keda.sh/paused do.
PAUSED_ANNOTATION = "berth.dev/paused"
