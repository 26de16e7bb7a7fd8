{{/*
Naming, labels and small values shared by every template.
DESIGN.md pins the names: the operator Deployment is "<release>-operator", the coordinator StatefulSet
"<release>-coordinator".
*/}}

{{/* Prefix of every object's name: fullnameOverride, else the release name. 40 characters leave room for the
longest suffix ("-coordinator-tokens") within Kubernetes' 63-character label values. */}}
{{- define "berth.prefix" -}}
{{- default .Release.Name .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- end -}}

{{- define "berth.operatorName" -}}{{ include "berth.prefix" . }}-operator{{- end -}}
{{- define "berth.coordinatorName" -}}{{ include "berth.prefix" . }}-coordinator{{- end -}}
{{- define "berth.analyticsName" -}}{{ include "berth.prefix" . }}-analytics{{- end -}}
{{- define "berth.adviceConfigMapName" -}}{{ include "berth.prefix" . }}-advice{{- end -}}

{{/* The ConfigMap where the operator keeps what it observes of Kafka fleets (the analytics job reads it). */}}
{{- define "berth.evidenceConfigMapName" -}}{{ include "berth.prefix" . }}-kafka-evidence{{- end -}}

{{/* The Secret with the coordinator's tokens file ("tokens.yaml") and the admin token ("admin-token"). */}}
{{- define "berth.tokensSecretName" -}}
{{- if .Values.auth.existingSecret -}}
{{- .Values.auth.existingSecret -}}
{{- else -}}
{{- include "berth.prefix" . }}-coordinator-tokens
{{- end -}}
{{- end -}}

{{/* Where the operator (and the analytics job) find the coordinator. Namespace-qualified, because fleets in other
namespaces inherit it as their default coordinator URL. */}}
{{- define "berth.coordinatorUrl" -}}
{{- if .Values.operator.coordinatorUrl -}}
{{- .Values.operator.coordinatorUrl -}}
{{- else -}}
http://{{ include "berth.coordinatorName" . }}.{{ .Release.Namespace }}:{{ .Values.coordinator.port }}
{{- end -}}
{{- end -}}

{{- define "berth.image" -}}
{{- include "berth.imageRef" (dict "image" .Values.image "ctx" .) -}}
{{- end -}}

{{/* The analytics job's image (pyspark and Java): analytics.image, its pull policy falling back to image's. */}}
{{- define "berth.analyticsImage" -}}
{{- include "berth.imageRef" (dict "image" .Values.analytics.image "ctx" .) -}}
{{- end -}}

{{- define "berth.imageRef" -}}
{{- if .image.digest -}}
{{- printf "%s@%s" .image.repository .image.digest -}}
{{- else -}}
{{- printf "%s:%s" .image.repository (default .ctx.Chart.AppVersion .image.tag) -}}
{{- end -}}
{{- end -}}

{{/* Labels on every object. */}}
{{- define "berth.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: berth
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Labels of one component's objects: (dict "ctx" $ "component" "operator"). */}}
{{- define "berth.componentLabels" -}}
{{ include "berth.labels" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* The immutable subset that Deployments, StatefulSets, Services and PDBs select pods by. It never includes the
version or chart labels, which change on upgrade, because a selector cannot change. */}}
{{- define "berth.selectorLabels" -}}
app.kubernetes.io/name: {{ .ctx.Chart.Name }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* Pod-level security for every Berth pod: non-root, the runtime's default seccomp profile, and volumes owned by
fsGroup so that the non-root user can use them. */}}
{{- define "berth.podSecurityContext" -}}
runAsNonRoot: true
{{- with .Values.podSecurity.runAsUser }}
runAsUser: {{ . }}
{{- end }}
{{- with .Values.podSecurity.runAsGroup }}
runAsGroup: {{ . }}
{{- end }}
{{- with .Values.podSecurity.fsGroup }}
fsGroup: {{ . }}
{{- end }}
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* Container-level hardening for every Berth container (the "restricted" Pod Security Standard and a read-only
root filesystem: each pod gets an emptyDir for /tmp instead). */}}
{{- define "berth.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
privileged: false
capabilities:
  drop: [ALL]
{{- end -}}

{{/* Checks that a JSON schema cannot express (it cannot compare two values), failing with the message a user
needs. Included by templates/validate.yaml, which renders nothing else. */}}
{{- define "berth.validate" -}}
{{- if gt (int .Values.operator.sessionMinMs) (int .Values.operator.sessionMaxMs) -}}
{{- fail (printf "operator.sessionMinMs (%d) must not exceed operator.sessionMaxMs (%d)" (int .Values.operator.sessionMinMs) (int .Values.operator.sessionMaxMs)) -}}
{{- end -}}
{{- if gt (int .Values.coordinator.groupMinSessionTimeoutMs) (int .Values.coordinator.groupMaxSessionTimeoutMs) -}}
{{- fail (printf "coordinator.groupMinSessionTimeoutMs (%d) must not exceed coordinator.groupMaxSessionTimeoutMs (%d)" (int .Values.coordinator.groupMinSessionTimeoutMs) (int .Values.coordinator.groupMaxSessionTimeoutMs)) -}}
{{- end -}}
{{- if and .Values.coordinator.enabled (or (lt (int .Values.operator.sessionMinMs) (int .Values.coordinator.groupMinSessionTimeoutMs)) (gt (int .Values.operator.sessionMaxMs) (int .Values.coordinator.groupMaxSessionTimeoutMs))) -}}
{{- fail (printf "operator.sessionMinMs..sessionMaxMs (%d..%d) must lie within coordinator.groupMinSessionTimeoutMs..groupMaxSessionTimeoutMs (%d..%d): the coordinator refuses joins with a session timeout outside its range" (int .Values.operator.sessionMinMs) (int .Values.operator.sessionMaxMs) (int .Values.coordinator.groupMinSessionTimeoutMs) (int .Values.coordinator.groupMaxSessionTimeoutMs)) -}}
{{- end -}}
{{- if and .Values.auth.existingSecret .Values.auth.groupTokens -}}
{{- fail "auth.groupTokens is only used when the chart generates the tokens Secret: add those tokens to auth.existingSecret's tokens.yaml instead" -}}
{{- end -}}
{{- $names := dict -}}
{{- range .Values.auth.groupTokens -}}
{{- if hasKey $names .name -}}
{{- fail (printf "auth.groupTokens: the name %q appears twice; each name becomes one Secret key" .name) -}}
{{- end -}}
{{- $_ := set $names .name true -}}
{{- end -}}
{{- if and .Values.metrics.serviceMonitor.enabled (not .Values.coordinator.enabled) -}}
{{- fail "metrics.serviceMonitor.enabled needs coordinator.enabled: the ServiceMonitor scrapes the coordinator this chart installs" -}}
{{- end -}}
{{- end -}}
