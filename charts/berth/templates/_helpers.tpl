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

{{/* The replicated coordinator's etcd (coordinator.ha): its StatefulSet and headless Service share this name. */}}
{{- define "berth.etcdName" -}}{{ include "berth.prefix" . }}-etcd{{- end -}}

{{/* The etcd members' client URLs, one per member by its stable DNS name (the coordinator tries them in turn). */}}
{{- define "berth.etcdEndpoints" -}}
{{- $name := include "berth.etcdName" . -}}
{{- $urls := list -}}
{{- range $i := until (int .Values.coordinator.ha.etcd.replicas) -}}
{{- $urls = append $urls (printf "%s://%s-%d.%s.%s.svc:2379" (include "berth.etcdScheme" $) $name $i $name $.Release.Namespace) -}}
{{- end -}}
{{- join "," $urls -}}
{{- end -}}

{{/* http or https: the scheme of etcd's client and peer URLs (coordinator.ha.etcd.tls.enabled). */}}
{{- define "berth.etcdScheme" -}}{{ if .Values.coordinator.ha.etcd.tls.enabled }}https{{ else }}http{{ end }}{{- end -}}

{{/* The etcd members' certificate (serving and peer), and the client certificate of the coordinator and the copy Job
(templates/coordinator-etcd-tls-secret.yaml). */}}
{{- define "berth.etcdTlsSecretName" -}}{{ include "berth.etcdName" . }}-tls{{- end -}}
{{- define "berth.etcdClientTlsSecretName" -}}{{ include "berth.etcdName" . }}-client-tls{{- end -}}

{{/* Where the coordinator and the copy Job find the etcd client certificate, its key and etcd's CA. */}}
{{- define "berth.etcdClientDir" -}}/etc/berth/etcd{{- end -}}

{{/* The coordinator's flags for etcd's TLS (with coordinator.ha.etcd.tls.enabled), one list item a line. */}}
{{- define "berth.etcdClientTlsArgs" -}}
{{- if .Values.coordinator.ha.etcd.tls.enabled }}
- --etcd-ca-file
- {{ include "berth.etcdClientDir" . }}/ca.crt
- --etcd-cert-file
- {{ include "berth.etcdClientDir" . }}/tls.crt
- --etcd-key-file
- {{ include "berth.etcdClientDir" . }}/tls.key
{{- end }}
{{- end -}}

{{/* The volume of the etcd client certificate (with coordinator.ha.etcd.tls.enabled). */}}
{{- define "berth.etcdClientTlsVolume" -}}
{{- if .Values.coordinator.ha.etcd.tls.enabled }}
- name: etcd-client-tls
  secret:
    secretName: {{ include "berth.etcdClientTlsSecretName" . }}
    defaultMode: 0440
{{- end }}
{{- end -}}

{{/* Its mount (no subPath, like every certificate the chart mounts). */}}
{{- define "berth.etcdClientTlsMount" -}}
{{- if .Values.coordinator.ha.etcd.tls.enabled }}
- name: etcd-client-tls
  mountPath: {{ include "berth.etcdClientDir" . }}
  readOnly: true
{{- end }}
{{- end -}}

{{/* The Secret with the coordinator's tokens file ("tokens.yaml") and the admin token ("admin-token"). */}}
{{- define "berth.tokensSecretName" -}}
{{- if .Values.auth.existingSecret -}}
{{- .Values.auth.existingSecret -}}
{{- else -}}
{{- include "berth.prefix" . }}-coordinator-tokens
{{- end -}}
{{- end -}}

{{/* Where the operator (and the analytics job) find the coordinator. Namespace-qualified, because fleets in other
namespaces inherit it as their default coordinator URL. https with coordinator.tls.enabled. */}}
{{- define "berth.coordinatorUrl" -}}
{{- if .Values.operator.coordinatorUrl -}}
{{- .Values.operator.coordinatorUrl -}}
{{- else -}}
{{ if .Values.coordinator.tls.enabled }}https{{ else }}http{{ end }}://{{ include "berth.coordinatorName" . }}.{{ .Release.Namespace }}:{{ .Values.coordinator.port }}
{{- end -}}
{{- end -}}

{{/* Where the operator keeps its owner records of Kafka groups (Leases). */}}
{{- define "berth.groupOwnersNamespace" -}}
{{- default .Release.Namespace .Values.operator.groupOwners.namespace -}}
{{- end -}}

{{/* The Secret with the coordinator's certificate (tls.crt, tls.key): the given one, else the chart's
Certificate's or the one the chart generates. */}}
{{- define "berth.coordinatorTlsSecretName" -}}
{{- default (printf "%s-coordinator-tls" (include "berth.prefix" .)) .Values.coordinator.tls.secretName -}}
{{- end -}}

{{/* The Secret with the CA clients verify the coordinator against. */}}
{{- define "berth.coordinatorCaSecretName" -}}
{{- default (include "berth.coordinatorTlsSecretName" .) .Values.coordinator.tls.caSecretName -}}
{{- end -}}

{{/* Where every client of the coordinator finds its CA. */}}
{{- define "berth.caFile" -}}/etc/berth/ca/ca.crt{{- end -}}

{{/* The CA volume of a client pod: only the CA's key is projected, never a private key of the same Secret. */}}
{{- define "berth.caVolume" -}}
- name: coordinator-ca
  secret:
    secretName: {{ include "berth.coordinatorCaSecretName" . }}
    items:
      - key: {{ .Values.coordinator.tls.caKey }}
        path: ca.crt
    defaultMode: 0444
{{- end -}}

{{- define "berth.caVolumeMount" -}}
- name: coordinator-ca
  mountPath: /etc/berth/ca
  readOnly: true
{{- end -}}

{{/* The shape of the generated tokens file without its secrets (names, groups, scopes): hashed into the coordinator
pod's annotations, so that it restarts exactly when it has new token entries to learn. */}}
{{- define "berth.tokenEntriesShape" -}}
{{- $shape := list (dict "name" "admin" "admin" true) (dict "name" "analytics" "scopes" (list "journal:read")) -}}
{{- range .Values.auth.groupTokens -}}
{{- $shape = append $shape (dict "name" .name "groups" .groups "admin" (default false .admin)) -}}
{{- end -}}
{{- toJson $shape -}}
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
{{- range .Values.operator.adoptGroups -}}
{{- if or (not .namespace) (not .groups) -}}
{{- fail "operator.adoptGroups: each entry needs a namespace and a non-empty list of groups (globs)" -}}
{{- end -}}
{{- end -}}
{{- range .Values.auth.groupTokens -}}
{{- if hasKey $names .name -}}
{{- fail (printf "auth.groupTokens: the name %q appears twice; each name becomes one Secret key" .name) -}}
{{- end -}}
{{- $_ := set $names .name true -}}
{{- end -}}
{{- with .Values.coordinator.tls -}}
{{- if and .enabled (not $.Values.coordinator.enabled) (not .caSecretName) -}}
{{- fail "coordinator.tls.enabled with an external coordinator (coordinator.enabled false) needs coordinator.tls.caSecretName: the Secret with the CA that coordinator's certificate chains to (or coordinator.tls.enabled=false for an http:// coordinator)" -}}
{{- end -}}
{{- if and .certManager.enabled (not .enabled) -}}
{{- fail "coordinator.tls.certManager.enabled needs coordinator.tls.enabled" -}}
{{- end -}}
{{- if and .certManager.enabled (not .certManager.issuerRef.name) -}}
{{- fail "coordinator.tls.certManager.issuerRef.name is required: the Issuer or ClusterIssuer that signs the coordinator's certificate" -}}
{{- end -}}
{{- if and .certManager.enabled .secretName -}}
{{- fail "coordinator.tls.secretName and coordinator.tls.certManager.enabled: choose one (the Certificate writes its own Secret)" -}}
{{- end -}}
{{- end -}}
{{- if and .Values.operator.coordinatorUrl .Values.coordinator.tls.enabled (not (hasPrefix "https://" .Values.operator.coordinatorUrl)) -}}
{{- fail "coordinator.tls.enabled: operator.coordinatorUrl must be https://" -}}
{{- end -}}
{{- if and (gt (int .Values.operator.replicas) 1) (not .Values.operator.leaderElection.enabled) -}}
{{- fail (printf "operator.replicas is %d: more than one operator replica needs operator.leaderElection.enabled (without it every replica would act on every fleet)" (int .Values.operator.replicas)) -}}
{{- end -}}
{{- with .Values.operator.leaderElection -}}
{{- if and .enabled (not (and (lt (int .retryPeriodSeconds) (int .renewDeadlineSeconds)) (lt (int .renewDeadlineSeconds) (int .leaseDurationSeconds)))) -}}
{{- fail (printf "operator.leaderElection: retryPeriodSeconds (%d) < renewDeadlineSeconds (%d) < leaseDurationSeconds (%d) must hold: a leader must stop acting before another may take over" (int .retryPeriodSeconds) (int .renewDeadlineSeconds) (int .leaseDurationSeconds)) -}}
{{- end -}}
{{- end -}}
{{- if and .Values.coordinator.ha.enabled (not .Values.coordinator.enabled) -}}
{{- fail "coordinator.ha.enabled needs coordinator.enabled: it runs the coordinator this chart installs as replicas" -}}
{{- end -}}
{{- if and .Values.coordinator.ha.copyFromClaim (not .Values.coordinator.ha.enabled) -}}
{{- fail "coordinator.ha.copyFromClaim needs coordinator.ha.enabled: it copies a data dir into the replicas' etcd" -}}
{{- end -}}
{{- if and .Values.coordinator.ha.copyFromClaim (gt (int .Values.coordinator.ha.replicas) 0) -}}
{{- fail "coordinator.ha.copyFromClaim needs coordinator.ha.replicas 0: the copy goes into an empty prefix, before any replica serves it" -}}
{{- end -}}
{{- if and .Values.metrics.serviceMonitor.enabled (not .Values.coordinator.enabled) -}}
{{- fail "metrics.serviceMonitor.enabled needs coordinator.enabled: the ServiceMonitor scrapes the coordinator this chart installs" -}}
{{- end -}}
{{- end -}}
