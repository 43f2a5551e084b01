{{/* The chart's name, or nameOverride. */}}
{{- define "taskgate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The objects' name: fullnameOverride, else the release's name, with
the chart's name after it unless the release's name holds it already. */}}
{{- define "taskgate.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "taskgate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "taskgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "taskgate.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "taskgate.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "taskgate.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "taskgate.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* A flag's value as taskgate reads it: whole numbers without an
exponent (YAML numbers arrive as float64), the rest as strings. */}}
{{- define "taskgate.flagValue" -}}
{{- if and (kindIs "float64" .) (eq (floor .) .) }}{{ int64 . }}{{ else }}{{ . }}{{ end }}
{{- end }}

{{/* One flag as arguments: name and value, a list as the flag repeated. */}}
{{- define "taskgate.flagArgs" -}}
{{- $name := index . 0 }}{{ $value := index . 1 }}
{{- if kindIs "slice" $value }}
{{- range $value }}
- {{ printf "--%s=%s" $name (include "taskgate.flagValue" .) | quote }}
{{- end }}
{{- else }}
- {{ printf "--%s=%s" $name (include "taskgate.flagValue" $value) | quote }}
{{- end }}
{{- end }}

{{/* The --redis-url of redis.mode sentinel or cluster. Passwords are
$(VAR) references that the kubelet expands from earlier env entries. */}}
{{- define "taskgate.redisURL" -}}
{{- $r := .Values.redis }}
{{- $scheme := ternary "rediss" "redis" $r.tls }}
{{- $user := "" }}
{{- if $r.password.existingSecret }}
{{- $user = printf "%s:$(REDIS_PASSWORD)@" $r.username }}
{{- else if $r.username }}
{{- $user = printf "%s@" $r.username }}
{{- end }}
{{- $query := list }}
{{- range $k, $v := $r.options }}
{{- $query = append $query (printf "%s=%s" $k (include "taskgate.flagValue" $v | urlquery)) }}
{{- end }}
{{- if eq $r.mode "sentinel" }}
{{- if $r.sentinelAuth.username }}
{{- $query = append $query (printf "sentinel_username=%s" ($r.sentinelAuth.username | urlquery)) }}
{{- end }}
{{- if $r.sentinelAuth.existingSecret }}
{{- $query = append $query "sentinel_password=$(REDIS_SENTINEL_PASSWORD)" }}
{{- end }}
{{- printf "%s+sentinel://%s%s/%s/%d" $scheme $user (join "," $r.sentinel.addresses) $r.sentinel.master (int $r.sentinel.db) }}
{{- else }}
{{- printf "%s+cluster://%s%s" $scheme $user (join "," $r.cluster.addresses) }}
{{- end }}
{{- with $query }}?{{ join "&" . }}{{ end }}
{{- end }}

{{/* The names the console is reached by inside the cluster. */}}
{{- define "taskgate.consoleHosts" -}}
{{- $svc := printf "%s-console" (include "taskgate.fullname" .) }}
{{- $hosts := list $svc (printf "%s.%s" $svc .Release.Namespace) (printf "%s.%s.svc" $svc .Release.Namespace) (printf "%s.%s.svc.cluster.local" $svc .Release.Namespace) }}
{{- join "," (concat $hosts .Values.console.hosts) }}
{{- end }}

{{/* Checks across values that the schema cannot express. */}}
{{- define "taskgate.validate" -}}
{{- $v := .Values }}
{{- if eq $v.redis.mode "embedded" }}
{{- if or $v.autoscaling.enabled (gt (int $v.replicaCount) 1) }}
{{- fail "redis.mode embedded keeps tasks in one process: set replicaCount 1 and autoscaling.enabled false, or use Redis" }}
{{- end }}
{{- end }}
{{- if and (eq $v.redis.mode "url") (not $v.redis.url.existingSecret) (not $v.redis.url.value) }}
{{- fail "redis.mode url needs redis.url.existingSecret (a Secret holding the URL) or redis.url.value" }}
{{- end }}
{{- if and (eq $v.redis.mode "sentinel") (not $v.redis.sentinel.addresses) }}
{{- fail "redis.mode sentinel needs redis.sentinel.addresses (host:port of each sentinel)" }}
{{- end }}
{{- if and (eq $v.redis.mode "cluster") (not $v.redis.cluster.addresses) }}
{{- fail "redis.mode cluster needs redis.cluster.addresses (host:port of some of its nodes)" }}
{{- end }}
{{- if and (not $v.upstream.url) (not $v.upstream.command) }}
{{- fail "set upstream.url (the MCP server's endpoint) or upstream.command" }}
{{- end }}
{{- if and $v.upstream.url $v.upstream.command }}
{{- fail "set one of upstream.url and upstream.command, not both" }}
{{- end }}
{{- if and $v.console.enabled (not $v.console.token.existingSecret) }}
{{- fail "console.enabled needs console.token.existingSecret: a console on a pod address requires a token" }}
{{- end }}
{{- if and $v.webhooks.url (not $v.webhooks.secret.existingSecret) }}
{{- fail "webhooks.url needs webhooks.secret.existingSecret (the whsec_ signing secret)" }}
{{- end }}
{{- if and $v.upstream.ca.secretName $v.upstream.ca.configMapName }}
{{- fail "set one of upstream.ca.secretName and upstream.ca.configMapName" }}
{{- end }}
{{- if and $v.metrics.port (or (eq (int $v.metrics.port) (int $v.containerPort)) (and $v.console.enabled (eq (int $v.metrics.port) (int $v.console.port)))) }}
{{- fail "metrics.port must differ from containerPort and console.port" }}
{{- end }}
{{- if and $v.console.enabled (eq (int $v.console.port) (int $v.containerPort)) }}
{{- fail "console.port must differ from containerPort" }}
{{- end }}
{{- end }}
