{{/* Labels of every object. */}}
{{- define "pilotfish.labels" -}}
app.kubernetes.io/name: pilotfish
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{/* Labels that select the pods. */}}
{{- define "pilotfish.selector" -}}
app: {{ .Values.serviceName }}
app.kubernetes.io/name: pilotfish
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "pilotfish.webhookConfigName" -}}
{{- .Values.webhook.configName | default (printf "pilotfish-validator-%s" .Release.Namespace) }}
{{- end }}

{{/* istiod's injector name: the ConfigMap and the MutatingWebhookConfiguration. */}}
{{- define "pilotfish.injectorName" -}}
{{- if and .Values.revision (ne .Values.revision "default") }}istio-sidecar-injector-{{ .Values.revision }}{{ else }}istio-sidecar-injector{{ end }}
{{- end }}
