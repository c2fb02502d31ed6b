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

{{/* The mesh ConfigMap istiod reads for this revision: istio, istio-<revision>. */}}
{{- define "pilotfish.meshConfigName" -}}
{{- if and .Values.revision (ne .Values.revision "default") }}istio-{{ .Values.revision }}{{ else }}istio{{ end }}
{{- end }}

{{/* This chart's Service on istiod's TLS port: where injected proxies and
     istio-agent find their control plane and CA. */}}
{{- define "pilotfish.discoveryAddress" -}}
{{ .Values.serviceName }}.{{ .Release.Namespace }}.svc:15012
{{- end }}
