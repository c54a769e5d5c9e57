{{/*
The two configuration files, deploy/config/pdc.yaml and
deploy/scheduler/kube-scheduler-config.yaml of the kustomize base, with the
chart's values filled in. With the default values both render byte for byte
like those files (tests/deploy/check_helm.py compares them), so their comments
are the same as there; edit both together.
*/}}
{{- define "pdc.configFile" -}}
# pdc configuration for the cluster (config/pdc.example.yaml documents every
# field and its default). One file for both programs: pdc-extender reads the
# top level and `extender:`, pdc-node the top level and `node:`. It becomes
# the ConfigMap pdc-config-<content hash> (kustomize's configMapGenerator; the
# Helm chart renders the same file and name from its values): a change rolls
# both workloads because the ConfigMap name changes.

# The same resource names must be the scheduler's managedResources
# (scheduler/kube-scheduler-config.yaml) and the admission policy's `managed`
# list (admission/require-pdc-scheduler.yaml). KubeVirt must permit these PCI
# ids with externalResourceProvider: true: scripts/kubevirt-enable-pdc.py
# derives those entries from this file and adds them to the KubeVirt CR.
deviceClasses:
{{- range .Values.deviceClasses }}
  - resourceName: {{ .resourceName }}
    selectors: [{{ range $i, $s := .selectors }}{{ if $i }}, {{ end }}{{ $s | toString | quote }}{{ end }}]
{{- if eq (.mode | default "devicePlugin") "dra" }}
    mode: dra                            # pdc-node is this class's DRA driver
    draDriverName: {{ include "pdc.draDriverName" . }}  # = DeviceClass {{ include "pdc.draDriverName" . }}
{{- end }}
{{- end }}

logFormat: json   # one JSON object per line, for the cluster's log pipeline
logLevel: info

extender:
  listen: "0.0.0.0:8888"           # Service pdc-extender, port http
  schedulerPathPrefix: /scheduler  # = the urlPrefix path in the scheduler config
{{- if .Values.webhook.enabled }}
  # The admission webhook that pins a restarting VM's pod to the node of its
  # claims (webhook/mutatingwebhookconfiguration.yaml): its own HTTPS port
  # and threads, the Secret {{ .Values.webhook.secretName }}, re-read when it is rotated.
  webhook:
    listen: "0.0.0.0:8443"         # Service pdc-extender, port webhook
    certFile: {{ include "pdc.webhookTLSDir" . }}/tls.crt
    keyFile: {{ include "pdc.webhookTLSDir" . }}/tls.key
{{- end }}
{{- if .Values.schedulerTLS.enabled }}
  # HTTPS on the one listener (kube-scheduler, pdc-node, the probes,
  # Prometheus) with the certificate of the Secret {{ .Values.schedulerTLS.secretName }}.
{{- if .Values.schedulerTLS.clientSecretName }}
  # Mutual TLS: the scheduler verbs need kube-scheduler's client certificate,
  # signed by the CA of the Secret {{ .Values.schedulerTLS.clientSecretName }}.
{{- end }}
  # Rotated Secrets are picked up without a restart.
  tls:
    certFile: {{ include "pdc.tlsDir" . }}/tls.crt
    keyFile: {{ include "pdc.tlsDir" . }}/tls.key
{{- if .Values.schedulerTLS.clientSecretName }}
    clientCAFile: {{ include "pdc.clientTLSDir" . }}/ca.crt
{{- end }}
{{- end }}
  # The record is the cluster's: PersistentDeviceClaim objects (their
  # status) and the ConfigMaps pdc-holds-* of pdc-extender's namespace.
  store: kubernetes
  # The admin token, for every REST call under /v1/ (claims, inventory,
  # reads too; people and pdcctl): the Secret {{ .Values.apiToken.secretName }}.
  tokenFile: /var/run/secrets/pdc/token
  # Each pdc-node presents its own projected service-account token
  # (node/daemonset.yaml), checked with a TokenReview: it may write only its
  # own node's inventory and hand-offs (docs/operations.md "Node identity").
  nodeAuth:
    serviceAccount: {{ .Release.Namespace }}/pdc-node
    audience: pdc-extender         # = the DaemonSet's serviceAccountToken audience
    cacheTTL: 2m
{{- if not (and .Values.schedulerTLS.enabled .Values.schedulerTLS.clientSecretName) }}
  # kube-scheduler authenticates only with a client certificate
  # (schedulerTLS.clientSecretName). Without one the scheduler verbs are
  # open to whatever can reach the Service, and pdc-extender refuses to
  # listen beyond loopback unless told so here.
  allowUnauthenticated: true
{{- end }}
  # Three missed heartbeats (node.heartbeatInterval) before a node's driver
  # counts as not reporting and filter stops placing fresh claims there.
  nodeStaleAfter: 30s
  scoring: binpack
  templateReclaimPolicy: Retain
  kubernetes:
    mode: in-cluster               # ServiceAccount pdc-extender (rbac/extender.yaml)
    schedulerName: pdc-scheduler   # its pods are watched (scheduler/kube-scheduler-config.yaml)
  # Three replicas (extender/extender.yaml), one leader through the Lease
  # pdc-extender; the leader alone is in the Service's endpoints (the
  # EndpointSlice pdc-extender-leader). kube-scheduler's timings.
  leaderElection:
    enabled: true
    leaseName: pdc-extender
    service: pdc-extender
    leaseDuration: 15s
    renewDeadline: 10s
    retryPeriod: 2s
{{- if .Values.extender.draKeeper.enabled }}
  # The DRA claim keeper (docs/design.md "The DRA claim keeper"): VMs kept in
  # the reservedFor of their resource.k8s.io ResourceClaims.
  dra:
    keeper:
      enabled: true
{{- end }}

node:
  nodeName: ""                     # "" = $NODE_NAME, set by the DaemonSet
  extenderURL: "{{ include "pdc.extenderURL" . }}"
{{- if .Values.schedulerTLS.enabled }}
  tls:
    caFile: {{ include "pdc.tlsDir" . }}/ca.crt
{{- end }}
  tokenFile: /var/run/secrets/pdc-node/token   # projected token, re-read when kubelet renews it
  sysfsRoot: /sys                  # hostPath /sys
  devRoot: /dev                    # hostPath /dev: vfio groups, block devices
  procRoot: /proc                  # hostPID: the host's processes and mounts
  stateDir: /var/lib/pdc-node      # hostPath: original drivers survive pod restarts
  heartbeatInterval: 10s
  metricsListen: "0.0.0.0:9102"
{{- if and (include "pdc.draDrivers" . | fromJsonArray) (ne (include "pdc.kubeletRoot" .) "/var/lib/kubelet") }}
  kubeletDir: {{ include "pdc.kubeletRoot" . }}  # node.kubeletRootDir: DRA registration and sockets
{{- end }}
{{- end -}}

{{- define "pdc.schedulerConfigFile" -}}
# KubeSchedulerConfiguration of pdc-scheduler, a second kube-scheduler that
# schedules only pods with spec.schedulerName: pdc-scheduler (KubeVirt VMs set
# it in spec.template.spec.schedulerName; virt-controller copies it to the
# virt-launcher pod).
#
# Why a secondary scheduler and not a second profile of the cluster's own
# kube-scheduler: `extenders` belong to the whole configuration, not to a
# profile ("shared by all scheduler profiles", k8s.io/kube-scheduler/config/v1).
# A profile would put pdc in the path of every pod of every profile that asks
# for a managed resource, and with ignorable: false an extender outage would
# stall them in the cluster's main scheduler. A separate Deployment keeps the
# blast radius to VMs that opted in, works on clusters whose control-plane
# scheduler cannot be reconfigured (managed Kubernetes), and rolls back by
# deleting it. The price: two schedulers share nodes without seeing each
# other's in-flight decisions; kubelet admission rejects the rare
# double-booking of CPU/memory and the pod is rescheduled.
#
# Field names are exactly those of k8s.io/kube-scheduler/config/v1
# (KubeSchedulerConfiguration, KubeSchedulerProfile, Extender,
# ExtenderManagedResource); tests/deploy/check_manifests.py checks every key.
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
# In-cluster credentials of the ServiceAccount pdc-scheduler.
clientConnection:
  kubeconfig: ""
leaderElection:
  # On, so that a second replica can be added for failover; the Lease is
  # {{ .Release.Namespace }}/pdc-scheduler (rbac/scheduler.yaml grants exactly that one).
  leaderElect: true
  resourceNamespace: {{ .Release.Namespace }}
  resourceName: pdc-scheduler
{{- if .Values.webhook.enabled }}
# percentageOfNodesToScore is left at kube-scheduler's default: on a large
# cluster it stops looking after a sample of feasible nodes (50 % down to 5 %
# as the cluster grows; all of them below 100 nodes) and sends only those to
# the extender. A restarting VM is not hurt by that: pdc-extender's admission
# webhook (webhook/) pins its pod to the node of its bound claims, so that
# node is the only feasible one. Trade-off and how to go back to 100:
# README.md, "Node sampling and the webhook".
{{- else }}
# Score every feasible node (webhook.enabled: false). kube-scheduler normally
# stops looking after a sample of feasible nodes (5-50 % depending on cluster
# size) and sends only those to the extender: without the webhook's pin, the
# one node holding a VM's bound device could be left out of the sample.
percentageOfNodesToScore: 100
{{- end }}
profiles:
  - schedulerName: pdc-scheduler
extenders:
  - # Service pdc-extender + extender.schedulerPathPrefix (config/pdc.yaml).
    urlPrefix: {{ include "pdc.extenderURL" . }}/scheduler
    # All four verbs: filter enforces claims, prioritize prefers the node
    # holding them (and the bin-pack/NUMA policy for fresh ones), bind
    # allocates + persists atomically before the Binding is created, preempt
    # drops nodes where evicting pods cannot free this VM's claimed device.
    filterVerb: filter
    prioritizeVerb: prioritize
    bindVerb: bind
    preemptVerb: preempt
    # Extender scores (0..10) are multiplied by weight and by 10
    # (MaxNodeScore / MaxExtenderPriority) before being added to the plugins'
    # sum. The default plugins' weights add up to 12 (TaintToleration 3,
    # NodeAffinity 2, PodTopologySpread 2, InterPodAffinity 2,
    # NodeResourcesFit 1, NodeResourcesBalancedAllocation 1, ImageLocality 1),
    # each scoring 0..100: at most 1200 apart. With weight 200 a single
    # step of the extender's score is worth 2000, so pdc's preference
    # (the node with the VM's device, then the placement policy) always wins;
    # the default plugins still break ties.
    weight: 200
    # The extender keeps its own view of nodes (inventory from pdc-node):
    # kube-scheduler sends NodeNames instead of full Node objects, which keeps
    # a 5000-node filter call small and fast.
    nodeCacheCapable: true
    # Only pods that request one of these resources are sent to pdc at all
    # (a VM's hostDevices become container resource requests in its
    # virt-launcher pod). Keep the list equal to deviceClasses in
    # config/pdc.yaml.
    #
    # ignoredByScheduler: false, so kube-scheduler's NodeResourcesFit still
    # counts the resource against the node's allocatable. pdc-node is the
    # kubelet device plugin for it, and kubelet admission rejects a pod on a
    # node without enough allocatable devices whatever the extender said;
    # letting the scheduler check the count first avoids choosing such a node
    # (the pod event then says "Insufficient devices.kubevirt.io/nvme").
    # The extender adds what the count cannot express: which device.
    managedResources:
{{- range .Values.deviceClasses }}
      - name: {{ .resourceName }}
        ignoredByScheduler: false
{{- end }}
    # Not ignorable: if pdc-extender is down, VM pods wait (and are retried)
    # instead of being placed without their claims, which is exactly the
    # "device swapped between VMs" failure pdc exists to prevent.
    ignorable: false
    # Default is 5s. Bind fsyncs the store and makes two API calls (pod
    # annotation, Binding); a filter over thousands of nodes is a large body.
    # 10s absorbs a slow disk or apiserver without hiding a hung extender.
    httpTimeout: 10s
    # Mutual TLS inside the cluster network: three changes that go together,
    # and two traps of kube-scheduler's extender client:
    #  - urlPrefix must start with https://. kube-scheduler sends each call to
    #    urlPrefix + "/" + verb; enableHTTPS only sets up the TLS settings of
    #    the HTTP transport and does not change the scheme, so with an
    #    http:// urlPrefix every call stays plain HTTP, without an error.
    #  - enableHTTPS: true needs tlsConfig.caFile or tlsConfig.caData. When
    #    both are empty kube-scheduler sets tlsConfig.insecure itself: the
    #    extender's certificate is not verified at all (any certificate, any
    #    name). With a CA, the certificate must name the urlPrefix host
    #    (pdc-extender.{{ .Release.Namespace }}.svc) or tlsConfig.serverName.
    #  - pdc-extender serves TLS (extender.tls.certFile/keyFile in
    #    config/pdc.yaml) on its one listener, so pdc-node moves too:
    #    node.extenderURL https://... and node.tls.caFile. With
    #    extender.tls.clientCAFile set, kube-scheduler must present a client
    #    certificate (tlsConfig.certFile/keyFile).
    # The Helm chart's schedulerTLS values turn each part on or off together
    # (README.md, "TLS between kube-scheduler and pdc-extender").
{{- if .Values.schedulerTLS.enabled }}
    enableHTTPS: true
    tlsConfig:
      caFile: {{ include "pdc.tlsDir" . }}/ca.crt
{{- if .Values.schedulerTLS.clientSecretName }}
      certFile: {{ include "pdc.clientTLSDir" . }}/tls.crt
      keyFile: {{ include "pdc.clientTLSDir" . }}/tls.key
{{- end }}
{{- else }}
    enableHTTPS: false
{{- end }}
{{- end -}}
