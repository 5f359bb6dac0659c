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

{{/* The pods' ServiceAccount: the chart's, or with serviceAccount.create false the named one. */}}
{{- define "webpush-gateway.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{ .Values.serviceAccount.name | default (include "webpush-gateway.name" (dict "root" $ "name" "gateway-worker")) }}
{{- else -}}
{{ required "serviceAccount.name: with serviceAccount.create false, the existing ServiceAccount to use" .Values.serviceAccount.name }}
{{- end -}}
{{- end -}}

{{/*
What every pod of the release shares, whichever process it runs: image pull secrets, priority,
node selection, tolerations and affinity (a pod spec's fields, at its indentation). The worker is
the only process today; another one's Deployment includes the same.
*/}}
{{- define "webpush-gateway.podScheduling" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/*
The worker pod's labels beside the selector's: podLabels may add, never replace, the labels the
selectors and the component use.
*/}}
{{- define "webpush-gateway.podLabels" -}}
{{- range $k, $v := .Values.podLabels }}
{{- if has $k (list "app.kubernetes.io/name" "app.kubernetes.io/instance" "app.kubernetes.io/component") }}
{{- fail (printf "podLabels: %s is the chart's own label (the selectors use it)" $k) }}
{{- end }}
{{- end }}
{{- with .Values.podLabels }}{{ toYaml . }}{{ end }}
{{- end -}}

{{/*
Fails the install when a file the worker is told to read is on no volume: a GATEWAY_..._FILE of
settings.extra, or a literal value of such a variable in extraEnv, must lie under a mount, and
every extraVolumeMounts entry must name a volume. Without this a pod starts, finds no file and
crash-loops.
*/}}
{{- define "webpush-gateway.checkMounts" -}}
{{- $mounts := list "/etc/webpush-gateway/registry" "/var/run/secrets/webpush-gateway/vapid" -}}
{{- $volumes := list "registry" "vapid" -}}
{{- range .Values.extraVolumes }}{{ $volumes = append $volumes .name }}{{ end -}}
{{- range .Values.extraVolumeMounts -}}
{{- if not (has .name $volumes) -}}
{{- fail (printf "extraVolumeMounts: %s names no volume of extraVolumes" .name) -}}
{{- end -}}
{{- $mounts = append $mounts (trimSuffix "/" .mountPath) -}}
{{- end -}}
{{- $files := dict -}}
{{- range $k, $v := .Values.settings.extra }}{{ if hasSuffix "_FILE" $k }}{{ $_ := set $files (printf "settings.extra.%s" $k) (toString $v) }}{{ end }}{{ end -}}
{{- range .Values.extraEnv }}{{ if and (hasSuffix "_FILE" .name) .value }}{{ $_ := set $files (printf "extraEnv %s" .name) .value }}{{ end }}{{ end -}}
{{- range $what, $file := $files -}}
{{- $found := false -}}
{{- range $mounts }}{{ if hasPrefix (printf "%s/" .) $file }}{{ $found = true }}{{ end }}{{ end -}}
{{- if not $found -}}
{{- fail (printf "%s: %s is under no volume mount; mount its Secret with extraVolumes and extraVolumeMounts" $what $file) -}}
{{- end -}}
{{- end -}}
{{- end -}}
