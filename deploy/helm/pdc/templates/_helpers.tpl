{{/*
Labels of every object: the kustomize base's app.kubernetes.io/part-of, plus
Helm's bookkeeping labels (the only difference tests/deploy/check_helm.py
allows between the chart and the base).
*/}}
{{- define "pdc.labels" -}}
app.kubernetes.io/part-of: pdc
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{/* An image reference from {repository, tag}; tag "" = the chart's appVersion. */}}
{{- define "pdc.image" -}}
{{- printf "%s:%s" .image.repository (.image.tag | default .root.Chart.AppVersion | toString) -}}
{{- end -}}

{{/*
kustomize's configMapGenerator name: NAME-<hash of the data>, so that the chart
and the base name a ConfigMap alike and a change of content rolls the pods
that mount it. The hash is kustomize's: the first 10 hex digits of the SHA-256
of the JSON {"data":…,"kind":"ConfigMap","name":""} (kustomize looks the name
up with a path it does not find, so it hashes ""), with 0 1 3 a e spelled
g h k m t. The comparison with the base fails if kustomize ever changes it.
Takes (dict "name" NAME "data" DATA).
*/}}
{{- define "pdc.hashedName" -}}
{{- $h := dict "data" .data "kind" "ConfigMap" "name" "" | toJson | sha256sum | trunc 10 -}}
{{- printf "%s-%s" .name ($h | replace "0" "g" | replace "1" "h" | replace "3" "k" | replace "a" "m" | replace "e" "t") -}}
{{- end -}}

{{/* The two configuration files (with their final newline) and ConfigMap names. */}}
{{- define "pdc.configText" -}}
{{- printf "%s\n" (include "pdc.configFile" .) -}}
{{- end -}}
{{- define "pdc.configName" -}}
{{- include "pdc.hashedName" (dict "name" "pdc-config" "data" (dict "pdc.yaml" (include "pdc.configText" .))) -}}
{{- end -}}
{{- define "pdc.schedulerConfigText" -}}
{{- printf "%s\n" (include "pdc.schedulerConfigFile" .) -}}
{{- end -}}
{{- define "pdc.schedulerConfigName" -}}
{{- include "pdc.hashedName" (dict "name" "pdc-scheduler-config" "data" (dict "kube-scheduler-config.yaml" (include "pdc.schedulerConfigText" .))) -}}
{{- end -}}

{{/* https when schedulerTLS is on: one listener serves kube-scheduler and pdc-node. */}}
{{- define "pdc.extenderURL" -}}
{{- printf "%s://pdc-extender.%s.svc:8888" (ternary "https" "http" .Values.schedulerTLS.enabled) .Release.Namespace -}}
{{- end -}}

{{/* Where the TLS Secrets are mounted. */}}
{{- define "pdc.tlsDir" -}}/var/run/pdc/tls{{- end -}}
{{- define "pdc.clientTLSDir" -}}/var/run/pdc/client-tls{{- end -}}
{{- define "pdc.webhookTLSDir" -}}/var/run/pdc/webhook-tls{{- end -}}

{{/* Settings that cannot work, refused with the value to fix. */}}
{{- define "pdc.validate" -}}
{{- if not .Values.deviceClasses -}}
{{- fail "deviceClasses: at least one device class (resourceName + selectors) is needed" -}}
{{- end -}}
{{- range $i, $c := .Values.deviceClasses -}}
{{- if not (and $c.resourceName $c.selectors) -}}
{{- fail (printf "deviceClasses[%d]: needs resourceName and a non-empty selectors list" $i) -}}
{{- end -}}
{{- end -}}
{{- $_ := include "pdc.draDrivers" . -}}
{{- if and .Values.schedulerTLS.enabled (not .Values.schedulerTLS.secretName) -}}
{{- fail "schedulerTLS.enabled: set schedulerTLS.secretName (a Secret with tls.crt, tls.key and ca.crt)" -}}
{{- end -}}
{{- if and .Values.schedulerTLS.clientSecretName (not .Values.schedulerTLS.enabled) -}}
{{- fail "schedulerTLS.clientSecretName needs schedulerTLS.enabled: true" -}}
{{- end -}}
{{- if not (hasPrefix "/" (toString .Values.node.kubeletRootDir)) -}}
{{- fail "node.kubeletRootDir: an absolute path, e.g. /var/lib/kubelet" -}}
{{- end -}}
{{- if not .Values.scheduler.image.tag -}}
{{- fail "scheduler.image.tag: the kube-scheduler version of your control plane, e.g. v1.30.14" -}}
{{- end -}}
{{- if not .Values.apiToken.secretName -}}
{{- fail "apiToken.secretName: the Secret with the API token (key `token`) is required" -}}
{{- end -}}
{{- end -}}

{{/*
The DRA driver names of the device classes in `mode: dra`, as a JSON list (use
with fromJsonArray); refuses an unknown mode and two classes with one driver.
*/}}
{{- define "pdc.draDrivers" -}}
{{- $out := list -}}
{{- range $i, $c := .Values.deviceClasses -}}
{{- $mode := $c.mode | default "devicePlugin" -}}
{{- if not (has $mode (list "devicePlugin" "dra")) -}}
{{- fail (printf "deviceClasses[%d].mode: %q: devicePlugin or dra" $i $mode) -}}
{{- end -}}
{{- if and $c.draDriverName (ne $mode "dra") -}}
{{- fail (printf "deviceClasses[%d].draDriverName needs mode: dra" $i) -}}
{{- end -}}
{{- if eq $mode "dra" -}}
{{- $d := include "pdc.draDriverName" $c -}}
{{- if has $d $out -}}
{{- fail (printf "deviceClasses[%d].draDriverName: %s is the driver of another class in mode dra" $i $d) -}}
{{- end -}}
{{- $out = append $out $d -}}
{{- end -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/* A class's DRA driver name (pdc-node's default: driver/dra/names.h). */}}
{{- define "pdc.draDriverName" -}}
{{- .draDriverName | default "nvme.pdc.kubevirt.io" | toString -}}
{{- end -}}

{{/* kubelet's root directory without a trailing slash. */}}
{{- define "pdc.kubeletRoot" -}}
{{- trimSuffix "/" (toString .Values.node.kubeletRootDir) -}}
{{- end -}}
