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
