// Package chartvalues is the Helm chart's values as Go types, and the values.schema.json made
// from them. Every key the chart reads is a field here; a key that is not is an error at `helm
// install`, `helm template` and `helm lint`, since the schema closes every object
// (additionalProperties: false). The Kubernetes parts of the values (volumes, tolerations,
// affinity, environment variables, NetworkPolicy peers, resources) are k8s.io/api's own types,
// so the schema checks them as strictly as the API server's field validation would.
//
// The committed schema is Schema's output; `cd deploy && go run ./chartvalues/cmd/chart-schema`
// writes it, and a test fails while the two differ.
package chartvalues

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// Values are the chart's values. Struct tags beside json: doc (the key's description),
// pattern, enum (comma-separated), minimum, maximum, const, contains (a value an array must
// hold), itemEnum (the values an array's items may take).
type Values struct {
	Image            Image                         `json:"image" doc:"The worker's image: a tag (the chart's appVersion when empty) or a digest, which wins."`
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets" doc:"Secrets of type kubernetes.io/dockerconfigjson the kubelet pulls the image with."`

	Settings Settings `json:"settings" doc:"The worker's GATEWAY_ settings (the settings ConfigMap)."`
	Vapid    Vapid    `json:"vapid" doc:"Where the VAPID private keys are: a Secret that exists before the install."`
	Redis    Redis    `json:"redis" doc:"Where the Redis URL is: a Secret that exists before the install."`
	Registry string   `json:"registry" doc:"The provider table (registry.yaml) as a string; empty: the repository's."`

	Grace                         string `json:"grace" pattern:"^([0-9]+(\\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$" doc:"--grace: how long in-flight sends may finish after SIGTERM (a Go duration)."`
	TerminationGracePeriodSeconds int64  `json:"terminationGracePeriodSeconds" minimum:"1" doc:"More than grace plus the longest provider timeout of the registry."`

	Resources corev1.ResourceRequirements `json:"resources" doc:"The worker container's requests and limits; GOMEMLIMIT follows the memory limit."`
	Keda      Keda                        `json:"keda" doc:"KEDA's ScaledObject; with enabled false the Deployment runs replicas pods."`
	Replicas  int32                       `json:"replicas" minimum:"0" doc:"Pods when keda.enabled is false."`

	ServiceAccount    ServiceAccount      `json:"serviceAccount" doc:"The pods' ServiceAccount (they get no API token)."`
	PodAnnotations    map[string]string   `json:"podAnnotations" doc:"Annotations of the worker's pods."`
	PodLabels         map[string]string   `json:"podLabels" doc:"Labels of the worker's pods, beside the chart's own (which selectors use and which these may not replace)."`
	PriorityClassName string              `json:"priorityClassName" doc:"The pods' PriorityClass."`
	NodeSelector      map[string]string   `json:"nodeSelector" doc:"Node labels the pods must run on."`
	Tolerations       []corev1.Toleration `json:"tolerations" doc:"Taints the pods tolerate."`
	Affinity          corev1.Affinity     `json:"affinity" doc:"Node and pod affinity; the chart already spreads pods across zones and nodes."`

	PodSecurityContext PodSecurityContext `json:"podSecurityContext" doc:"The pod's security context, within Pod Security's restricted profile."`
	SecurityContext    SecurityContext    `json:"securityContext" doc:"The worker container's security context, within Pod Security's restricted profile."`

	ExtraEnv          []corev1.EnvVar        `json:"extraEnv" doc:"More environment variables of the worker, value or valueFrom (a Secret's key, a field of the pod)."`
	ExtraEnvFrom      []corev1.EnvFromSource `json:"extraEnvFrom" doc:"More ConfigMaps or Secrets whose keys become environment variables."`
	ExtraVolumes      []corev1.Volume        `json:"extraVolumes" doc:"More volumes of the pod, such as a Secret with proxy credentials."`
	ExtraVolumeMounts []corev1.VolumeMount   `json:"extraVolumeMounts" doc:"Where the worker mounts extraVolumes; a settings.extra GATEWAY_..._FILE must lie under one."`

	PodMonitor     PodMonitor     `json:"podMonitor" doc:"The Prometheus operator's PodMonitor of the worker's /metrics."`
	PrometheusRule PrometheusRule `json:"prometheusRule" doc:"The Prometheus operator's PrometheusRule: the scaling rule KEDA queries and the alerts."`
	Proxy          Proxy          `json:"proxy" doc:"An HTTP CONNECT proxy every provider sends through (GATEWAY_PROXY)."`
	NetworkPolicy  NetworkPolicy  `json:"networkPolicy" doc:"The worker's NetworkPolicy."`
}

type Image struct {
	Repository string `json:"repository" pattern:"^[a-z0-9]" doc:"The image's repository."`
	Tag        string `json:"tag" doc:"The image's tag; empty: the chart's appVersion."`
	Digest     string `json:"digest" pattern:"^(sha256:[a-f0-9]{64})?$" doc:"A digest (sha256:...) that pins the image; it replaces the tag."`
	PullPolicy string `json:"pullPolicy" enum:"Always,IfNotPresent,Never"`
}

type Settings struct {
	Shards    int64  `json:"shards" minimum:"1" maximum:"1024" doc:"GATEWAY_SHARDS: shards of the key space, the same for every producer."`
	Subject   string `json:"subject" pattern:"^$|^(mailto:|https:)" doc:"GATEWAY_SUBJECT: the VAPID subject, a mailto: or https: contact."`
	LogFormat string `json:"logFormat" enum:"json,text"`
	LogLevel  string `json:"logLevel" enum:"debug,info,warn,error"`
	// Extra values may be strings, numbers or booleans: the template quotes each.
	Extra map[string]Scalar `json:"extra" propertyNames:"^GATEWAY_[A-Z0-9_]+$" doc:"More GATEWAY_<FLAG> variables; every run flag reads one."`
}

// Scalar is a string, a number or a boolean.
type Scalar any

type Vapid struct {
	ExistingSecret string         `json:"existingSecret" doc:"The Secret holding the PEM files."`
	Keys           []VapidKey     `json:"keys" doc:"One entry per key the worker signs with; the first is the default."`
	ExternalSecret ExternalSecret `json:"externalSecret" doc:"An ExternalSecret (external-secrets.io/v1) that makes existingSecret from a secret store."`
}

type VapidKey struct {
	Name      string `json:"name" pattern:"^[!-~]{1,128}$" doc:"The key id jobs pick with vapid_key."`
	SecretKey string `json:"secretKey" pattern:"^[-._a-zA-Z0-9]+$" doc:"The Secret's key holding this PEM file."`
}

type ExternalSecret struct {
	Enabled         bool                 `json:"enabled"`
	RefreshInterval string               `json:"refreshInterval"`
	SecretStoreRef  SecretStoreRef       `json:"secretStoreRef"`
	Data            []ExternalSecretData `json:"data" doc:"One entry per vapid.keys secretKey: where the store holds that PEM file."`
}

type SecretStoreRef struct {
	Kind string `json:"kind" enum:"SecretStore,ClusterSecretStore"`
	Name string `json:"name"`
}

type ExternalSecretData struct {
	SecretKey string    `json:"secretKey" required:"true"`
	RemoteRef RemoteRef `json:"remoteRef" required:"true"`
}

// RemoteRef is External Secrets' ExternalSecretDataRemoteRef (external-secrets.io/v1).
type RemoteRef struct {
	Key                string `json:"key" required:"true"`
	Property           string `json:"property"`
	Version            string `json:"version"`
	MetadataPolicy     string `json:"metadataPolicy" enum:"None,Fetch"`
	DecodingStrategy   string `json:"decodingStrategy" enum:"Auto,Base64,Base64URL,None"`
	ConversionStrategy string `json:"conversionStrategy" enum:"Default,Unicode"`
}

type Redis struct {
	ExistingSecret string `json:"existingSecret" doc:"The Secret holding the Redis URL."`
	URLKey         string `json:"urlKey" doc:"The Secret's key holding the URL."`
}

type Keda struct {
	Enabled          bool           `json:"enabled"`
	MinReplicaCount  int32          `json:"minReplicaCount" minimum:"0"`
	MaxReplicaCount  int32          `json:"maxReplicaCount" minimum:"1"`
	FallbackReplicas int32          `json:"fallbackReplicas" minimum:"1" doc:"Held while the Prometheus query fails four times in a row."`
	Prometheus       KedaPrometheus `json:"prometheus"`
	CPUUtilization   string         `json:"cpuUtilization" pattern:"^[1-9][0-9]*$" doc:"Target CPU utilisation in per cent of the request."`
}

type KedaPrometheus struct {
	ServerAddress string `json:"serverAddress" pattern:"^https?://"`
	Threshold     string `json:"threshold" pattern:"^[0-9]+(\\.[0-9]+)?$" doc:"Entries of backlog per replica."`
}

type ServiceAccount struct {
	Create      bool              `json:"create" doc:"Make the ServiceAccount; false uses name, which must exist."`
	Name        string            `json:"name" doc:"The ServiceAccount's name; empty: the release name and -gateway-worker."`
	Annotations map[string]string `json:"annotations" doc:"Annotations of the ServiceAccount (a cloud identity, for example)."`
}

// PodSecurityContext is the part of corev1.PodSecurityContext that Pod Security's restricted
// profile lets a pod set, each field held to what the profile allows.
type PodSecurityContext struct {
	RunAsNonRoot        bool           `json:"runAsNonRoot" const:"true"`
	RunAsUser           int64          `json:"runAsUser" minimum:"1"`
	RunAsGroup          int64          `json:"runAsGroup" minimum:"0"`
	FSGroup             int64          `json:"fsGroup" minimum:"0"`
	FSGroupChangePolicy string         `json:"fsGroupChangePolicy" enum:"OnRootMismatch,Always"`
	SupplementalGroups  []int64        `json:"supplementalGroups"`
	SeccompProfile      SeccompProfile `json:"seccompProfile" required:"true"`
}

// SecurityContext is the part of corev1.SecurityContext that the restricted profile lets a
// container set, each field held to what the profile allows.
type SecurityContext struct {
	RunAsNonRoot             bool           `json:"runAsNonRoot" const:"true"`
	RunAsUser                int64          `json:"runAsUser" minimum:"1"`
	RunAsGroup               int64          `json:"runAsGroup" minimum:"0"`
	AllowPrivilegeEscalation bool           `json:"allowPrivilegeEscalation" const:"false" required:"true"`
	Privileged               bool           `json:"privileged" const:"false"`
	ReadOnlyRootFilesystem   bool           `json:"readOnlyRootFilesystem"`
	Capabilities             Capabilities   `json:"capabilities" required:"true"`
	SeccompProfile           SeccompProfile `json:"seccompProfile"`
}

type Capabilities struct {
	Drop []string `json:"drop" contains:"ALL" required:"true" doc:"Must drop ALL."`
	Add  []string `json:"add" itemEnum:"NET_BIND_SERVICE" doc:"The only capability the restricted profile allows adding."`
}

type SeccompProfile struct {
	Type             string `json:"type" enum:"RuntimeDefault,Localhost" required:"true"`
	LocalhostProfile string `json:"localhostProfile"`
}

type PodMonitor struct {
	Enabled       bool              `json:"enabled"`
	Interval      string            `json:"interval" pattern:"^([0-9]+(ms|s|m|h))+$"`
	ScrapeTimeout string            `json:"scrapeTimeout" pattern:"^([0-9]+(ms|s|m|h))+$"`
	Labels        map[string]string `json:"labels" doc:"More labels, for a Prometheus whose podMonitorSelector wants them."`
}

type PrometheusRule struct {
	Enabled bool              `json:"enabled"`
	Labels  map[string]string `json:"labels" doc:"More labels, for a Prometheus whose ruleSelector wants them."`
}

type Proxy struct {
	URL   string                           `json:"url" pattern:"^(https?://.+)?$" doc:"GATEWAY_PROXY; empty sends direct."`
	Peers []networkingv1.NetworkPolicyPeer `json:"peers" doc:"The proxy's pods or address, the NetworkPolicy's only egress besides DNS and Redis."`
	Port  int32                            `json:"port" minimum:"1" maximum:"65535"`
}

type NetworkPolicy struct {
	Enabled    bool                    `json:"enabled"`
	Redis      NetworkPolicyRedis      `json:"redis"`
	Prometheus NetworkPolicyPrometheus `json:"prometheus"`
}

type NetworkPolicyRedis struct {
	Peers []networkingv1.NetworkPolicyPeer `json:"peers"`
	Ports []Port                           `json:"ports"`
}

// Port is a TCP port number.
type Port int32

type NetworkPolicyPrometheus struct {
	Peers []networkingv1.NetworkPolicyPeer `json:"peers"`
}
