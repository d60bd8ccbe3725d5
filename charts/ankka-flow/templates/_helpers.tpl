{{/* The name of every object of the release. */}}
{{- define "ankka-flow.fullname" -}}
{{- default "ankka-flow-operator" .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "ankka-flow.labels" -}}
app.kubernetes.io/name: ankka-flow-operator
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: ankka-flow
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "ankka-flow.selectorLabels" -}}
app.kubernetes.io/name: ankka-flow-operator
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "ankka-flow.clustersNamespace" -}}
{{- default .Release.Namespace .Values.kafkaClustersNamespace -}}
{{- end -}}

{{- define "ankka-flow.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag -}}
{{- if eq $tag "latest" -}}
{{- fail "image.tag: name a version, not latest" -}}
{{- end -}}
{{- printf "%s:%s" .Values.image.repository $tag -}}
{{- end -}}
