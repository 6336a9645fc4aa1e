{{/* Name of the chart, overridable. */}}
{{- define "groupless.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Full name: <release>-groupless, or the release name when it already contains the chart name. */}}
{{- define "groupless.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "groupless.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "groupless.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "groupless.selectorLabels" -}}
app.kubernetes.io/name: {{ include "groupless.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Selector of the Groupless pods (controller, webhook, extender) only: the optional second
scheduler's pods share name and instance but are component "scheduler". Selectors are immutable:
changing these needs the Deployment deleted before helm upgrade (see docs/installation.md). */}}
{{- define "groupless.controllerSelectorLabels" -}}
{{ include "groupless.selectorLabels" . }}
app.kubernetes.io/component: controller
{{- end -}}

{{- define "groupless.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "groupless.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "groupless.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository $tag -}}
{{- end -}}
{{- end -}}

{{- define "groupless.certSecretName" -}}
{{- default (printf "%s-cert" (include "groupless.fullname" .)) .Values.certSecretName -}}
{{- end -}}

{{/* Names of the two webhook configurations: fixed, the names certs/bootstrap.py patches caBundle into. */}}
{{- define "groupless.mutatingWebhookName" -}}
{{- printf "defaulting.webhook.provisioners.groupless.dev" -}}
{{- end -}}
{{- define "groupless.validatingWebhookName" -}}
{{- printf "validation.webhook.provisioners.groupless.dev" -}}
{{- end -}}

{{- define "groupless.extenderURL" -}}
{{- if .Values.schedulerExtender.urlPrefix -}}
{{- .Values.schedulerExtender.urlPrefix -}}
{{- else -}}
{{- printf "https://%s.%s.svc:%d" (include "groupless.fullname" .) .Release.Namespace (int .Values.extender.port) -}}
{{- end -}}
{{- end -}}

{{/* The extenders[] entry of a KubeSchedulerConfiguration. Arg: dict "root" $ "caFile" path-or-empty. */}}
{{- define "groupless.extenderConfig" -}}
{{- $root := .root -}}
- urlPrefix: {{ include "groupless.extenderURL" $root | quote }}
  filterVerb: filter
  prioritizeVerb: prioritize
  weight: {{ $root.Values.schedulerExtender.weight }}
  enableHTTPS: true
  nodeCacheCapable: {{ $root.Values.schedulerExtender.nodeCacheCapable }}
  ignorable: {{ $root.Values.schedulerExtender.ignorable }}
  httpTimeout: {{ $root.Values.schedulerExtender.httpTimeout | quote }}
  tlsConfig:
    {{- if .caFile }}
    caFile: {{ .caFile }}
    {{- else }}
    # Paste the CA of Groupless here (base64 PEM):
    #   kubectl -n {{ $root.Release.Namespace }} get secret {{ include "groupless.certSecretName" $root }} -o jsonpath='{.data.ca\.crt}'
    caData: ""
    {{- end }}
    serverName: {{ printf "%s.%s.svc" (include "groupless.fullname" $root) $root.Release.Namespace }}
{{- end -}}

{{/* k=v,k=v from a map, sorted by key (the format of GROUPLESS_NODE_LABELS). */}}
{{- define "groupless.kvList" -}}
{{- $items := list -}}
{{- range $k, $v := . -}}
{{- $items = append $items (printf "%s=%s" $k $v) -}}
{{- end -}}
{{- join "," $items -}}
{{- end -}}

{{/* Environment shared by the three containers. */}}
{{- define "groupless.commonEnv" -}}
# reportingInstance of Events, leader-election identity
- name: POD_NAME
  valueFrom: {fieldRef: {fieldPath: metadata.name}}
- name: POD_NAMESPACE
  valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
- {name: GROUPLESS_LOG_LEVEL, value: {{ .Values.logLevel | quote }}}
- {name: GROUPLESS_LOG_FORMAT, value: {{ .Values.logFormat | quote }}}
- {name: PYTHONDONTWRITEBYTECODE, value: "1"}
- {name: PYTHONUNBUFFERED, value: "1"}
- {name: HOME, value: /tmp}
{{- end -}}
