{{/*
An object's name: the release name, a dash, and the name the kustomize base gives the object,
so that each object maps to its counterpart in deploy/base by one rule.
Call with (dict "root" $ "name" "gateway-worker").
*/}}
{{- define "webpush-gateway.name" -}}
{{- printf "%s-%s" .root.Release.Name .name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels of every object but the ConfigMaps: the base's, plus Helm's release labels. */}}
{{- define "webpush-gateway.labels" -}}
app.kubernetes.io/name: gateway-worker
{{ include "webpush-gateway.configLabels" . }}
{{- end -}}

{{/* Labels of the ConfigMaps (the base generates them without a name label). */}}
{{- define "webpush-gateway.configLabels" -}}
app.kubernetes.io/part-of: webpush-gateway
{{ include "webpush-gateway.releaseLabels" . }}
{{- end -}}

{{- define "webpush-gateway.releaseLabels" -}}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* What selects this release's worker pods: the base's label and the release. */}}
{{- define "webpush-gateway.selectorLabels" -}}
app.kubernetes.io/name: gateway-worker
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "webpush-gateway.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{/* The provider table the registry ConfigMap holds. */}}
{{- define "webpush-gateway.registry" -}}
{{- .Values.registry | default (.Files.Get "files/registry.yaml") -}}
{{- end -}}

{{/* The settings ConfigMap's data. */}}
{{- define "webpush-gateway.settings" -}}
GATEWAY_SHARDS: {{ .Values.settings.shards | toString | quote }}
GATEWAY_LOG_FORMAT: {{ .Values.settings.logFormat | quote }}
GATEWAY_LOG_LEVEL: {{ .Values.settings.logLevel | quote }}
GATEWAY_SUBJECT: {{ required "settings.subject: the VAPID subject (mailto: or https:) is required" .Values.settings.subject | quote }}
{{- with .Values.proxy.url }}
GATEWAY_PROXY: {{ . | quote }}
{{- end }}
{{- range $k, $v := .Values.settings.extra }}
{{ $k }}: {{ $v | toString | quote }}
{{- end }}
{{- end -}}

{{/* --vapid-key: id=file for every key, the files of the Secret's mount. */}}
{{- define "webpush-gateway.vapidKeys" -}}
{{- $keys := list -}}
{{- range required "vapid.keys: at least one key is required" .Values.vapid.keys -}}
{{- $keys = append $keys (printf "%s=/var/run/secrets/webpush-gateway/vapid/%s" (required "vapid.keys[].name is required" .name) (required "vapid.keys[].secretKey is required" .secretKey)) -}}
{{- end -}}
{{- join "," $keys -}}
{{- end -}}
