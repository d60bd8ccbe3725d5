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

{{- /* The watched namespaces, deduplicated, as a list; empty: every namespace. */ -}}
{{- define "ankka-flow.watchNamespaces" -}}
{{- if .Values.watchNamespace -}}
{{- fail "watchNamespace is now watchNamespaces, a list: --set 'watchNamespaces={shop}'" -}}
{{- end -}}
{{- $all := list -}}
{{- range .Values.watchNamespaces -}}
{{- if not . -}}
{{- fail "watchNamespaces: an empty namespace name" -}}
{{- end -}}
{{- $all = append $all (toString .) -}}
{{- end -}}
{{- toJson (uniq $all) -}}
{{- end -}}

{{- /* The sidecar image, refused when it names no version (no tag, or `latest`). */ -}}
{{- define "ankka-flow.sidecarImage" -}}
{{- $image := .Values.sidecarImage | default "" | trim -}}
{{- if $image -}}
{{- $last := last (splitList "/" $image) -}}
{{- if not (or (contains "@" $last) (contains ":" $last)) -}}
{{- fail (printf "sidecarImage %s: name a version tag (or a digest), not the default latest" $image) -}}
{{- end -}}
{{- if hasSuffix ":latest" $last -}}
{{- fail (printf "sidecarImage %s: name a version tag (or a digest), not latest" $image) -}}
{{- end -}}
{{- end -}}
{{- $image -}}
{{- end -}}

{{- /* The prefix of the aggregated ClusterRoles for people: the release's name without its
"-operator" suffix (ankka-flow-view, ankka-flow-edit by default). */ -}}
{{- define "ankka-flow.rolePrefix" -}}
{{- include "ankka-flow.fullname" . | trimSuffix "-operator" -}}
{{- end -}}

{{- /* The pod's security context: what Pod Security `restricted` asks, with the podSecurityContext
value laid over it; refused when that value would break `restricted`. */ -}}
{{- define "ankka-flow.podSecurityContext" -}}
{{- $own := .Values.podSecurityContext | default dict -}}
{{- if eq (toString (get $own "runAsNonRoot")) "false" -}}
{{- fail "podSecurityContext.runAsNonRoot: Pod Security restricted needs true; leave it out" -}}
{{- end -}}
{{- if and (hasKey $own "runAsUser") (eq (toString (get $own "runAsUser")) "0") -}}
{{- fail "podSecurityContext.runAsUser: 0 is root, which Pod Security restricted forbids; leave it out or name another UID" -}}
{{- end -}}
{{- $seccomp := get (get $own "seccompProfile" | default dict) "type" | default "RuntimeDefault" -}}
{{- if not (has $seccomp (list "RuntimeDefault" "Localhost")) -}}
{{- fail (printf "podSecurityContext.seccompProfile.type: %s is forbidden by Pod Security restricted; write RuntimeDefault or Localhost" $seccomp) -}}
{{- end -}}
{{- toYaml (merge (deepCopy $own) (dict "runAsNonRoot" true "seccompProfile" (dict "type" "RuntimeDefault"))) -}}
{{- end -}}
