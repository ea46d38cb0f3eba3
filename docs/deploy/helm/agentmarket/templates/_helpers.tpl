{{- define "agentmarket.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "agentmarket.secretName" -}}
{{- default (include "agentmarket.fullname" .) .Values.existingSecret -}}
{{- end -}}

{{- define "agentmarket.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* selectorLabels takes (list . "component") */}}
{{- define "agentmarket.selectorLabels" -}}
app.kubernetes.io/name: {{ (index . 0).Chart.Name }}
app.kubernetes.io/instance: {{ (index . 0).Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{- define "agentmarket.image" -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}

{{/* The settings both processes read: the Secret's and the shared values. */}}
{{- define "agentmarket.commonEnv" -}}
- name: AGENTMARKET_DATABASE_URL
  valueFrom: {secretKeyRef: {name: {{ include "agentmarket.secretName" . }}, key: databaseURL}}
- name: AGENTMARKET_CLICKHOUSE_URL
  valueFrom: {secretKeyRef: {name: {{ include "agentmarket.secretName" . }}, key: clickhouseURL}}
- name: AGENTMARKET_SECRET_KEY
  valueFrom: {secretKeyRef: {name: {{ include "agentmarket.secretName" . }}, key: secretKey}}
- name: AGENTMARKET_REDIS_URL
  valueFrom: {secretKeyRef: {name: {{ include "agentmarket.secretName" . }}, key: redisURL, optional: true}}
{{- with .Values.clickhouse.cluster }}
- name: AGENTMARKET_CLICKHOUSE_CLUSTER
  value: {{ . | quote }}
{{- end }}
{{- with .Values.fetchAllowCIDRs }}
- name: AGENTMARKET_FETCH_ALLOW_CIDRS
  value: {{ . | quote }}
{{- end }}
- name: AGENTMARKET_LOG_LEVEL
  value: {{ .Values.logLevel | quote }}
- name: AGENTMARKET_SHUTDOWN_TIMEOUT
  value: {{ printf "%ds" (int .Values.shutdownTimeoutSeconds) | quote }}
- name: AGENTMARKET_DATA_DIR
  value: /data
- name: AGENTMARKET_PUBLIC_METER_URL
  value: {{ required "meter.publicURL is required: the URL buyers reach the meters at" .Values.meter.publicURL | quote }}
- name: AGENTMARKET_METRICS_ADDR
  value: {{ printf "0.0.0.0:%d" (int .Values.metrics.port) | quote }}
- name: AGENTMARKET_METRICS_LISTING_COST
  value: {{ .Values.metrics.listingCost | quote }}
{{- end -}}

{{/* metricsService takes (list . "component"): the operator listener's Service of a component, for Prometheus only. */}}
{{- define "agentmarket.metricsService" -}}
{{- $ := index . 0 -}}
{{- $component := index . 1 -}}
# The operator listener of the {{ $component }} (/metrics): for Prometheus, never behind a load balancer or ingress.
apiVersion: v1
kind: Service
metadata:
  name: {{ include "agentmarket.fullname" $ }}-{{ $component }}-metrics
  labels:
    {{- include "agentmarket.labels" $ | nindent 4 }}
    app.kubernetes.io/component: {{ $component }}-metrics
spec:
  type: ClusterIP
  selector:
    {{- include "agentmarket.selectorLabels" (list $ $component) | nindent 4 }}
  ports:
    - {name: metrics, port: {{ $.Values.metrics.port }}, targetPort: metrics, protocol: TCP}
{{- end -}}

{{- define "agentmarket.extraEnv" -}}
{{- range $k, $v := . }}
- name: {{ $k }}
  value: {{ $v | quote }}
{{- end }}
{{- end -}}

{{/* Probes on the ops endpoints: /readyz stays 200 while an optional service (ClickHouse, Stripe) is down. */}}
{{- define "agentmarket.probes" -}}
readinessProbe:
  httpGet: {path: /readyz, port: http}
  periodSeconds: 5
  timeoutSeconds: 3
  failureThreshold: 3
livenessProbe:
  httpGet: {path: /healthz, port: http}
  periodSeconds: 10
  timeoutSeconds: 3
  failureThreshold: 6
startupProbe:
  httpGet: {path: /healthz, port: http}
  periodSeconds: 2
  failureThreshold: 60
{{- end -}}

{{- define "agentmarket.securityContext" -}}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  runAsNonRoot: true
  capabilities: {drop: [ALL]}
{{- end -}}
