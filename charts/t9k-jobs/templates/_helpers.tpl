{{/*
The chart renders manifests/ (files/manifests is a link to it) rather than copies of it, so
that a Helm install and install.yaml cannot drift: each object is read as it is there, its
namespace made the release's, the chart's labels added, and the Deployment given the values.
*/}}

{{/* Labels Helm's own tools read, on every object the chart makes. */}}
{{- define "t9k-jobs.labels" -}}
app.kubernetes.io/part-of: t9k-jobs
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{/*
t9k-jobs.objects: the objects of one file of manifests/ (dict "root" . "file" path), with
t9k-system, the namespace the manifests name, made the release's (in the objects and in the
admission policy's expressions), and the Namespace object left out: Helm installs into a
namespace that exists (--create-namespace).
*/}}
{{- define "t9k-jobs.objects" -}}
{{- $root := .root -}}
{{- $text := $root.Files.Get (printf "files/manifests/%s" .file) | replace "t9k-system" $root.Release.Namespace -}}
{{- $objects := list -}}
{{- range $doc := splitList "\n---\n" $text -}}
{{- $o := fromYaml $doc -}}
{{- if hasKey $o "Error" -}}{{- fail (printf "%s: %s" $.file $o.Error) -}}{{- end -}}
{{- if and $o.kind (ne $o.kind "Namespace") -}}
{{- $meta := $o.metadata -}}
{{- $_ := set $meta "labels" (merge (default (dict) $meta.labels) (fromYaml (include "t9k-jobs.labels" $root))) -}}
{{- $objects = append $objects $o -}}
{{- end -}}
{{- end -}}
{{- toYaml (dict "items" $objects) -}}
{{- end }}
