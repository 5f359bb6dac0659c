package deploy_test

import (
	"fmt"
	"slices"
	"sort"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// scaledObject mirrors KEDA's ScaledObject (keda.sh/v1alpha1) as the CRD of KEDA v2.17
// defines it (apis/keda/v1alpha1/scaledobject_types.go and scaletriggers_types.go in
// github.com/kedacore/keda), with the fields these manifests use or could. KEDA's own module
// pulls in every scaler's client library, so the types are mirrored rather than imported;
// decoded strictly, a field KEDA does not have fails.
type scaledObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              scaledObjectSpec `json:"spec"`
}

type scaledObjectSpec struct {
	ScaleTargetRef        *scaleTarget     `json:"scaleTargetRef"`
	PollingInterval       *int32           `json:"pollingInterval,omitempty"`
	InitialCooldownPeriod *int32           `json:"initialCooldownPeriod,omitempty"`
	CooldownPeriod        *int32           `json:"cooldownPeriod,omitempty"`
	IdleReplicaCount      *int32           `json:"idleReplicaCount,omitempty"`
	MinReplicaCount       *int32           `json:"minReplicaCount,omitempty"`
	MaxReplicaCount       *int32           `json:"maxReplicaCount,omitempty"`
	Advanced              *advancedConfig  `json:"advanced,omitempty"`
	Triggers              []scaleTrigger   `json:"triggers"`
	Fallback              *scalingFallback `json:"fallback,omitempty"`
}

type scaleTarget struct {
	Name                   string `json:"name"`
	APIVersion             string `json:"apiVersion,omitempty"`
	Kind                   string `json:"kind,omitempty"`
	EnvSourceContainerName string `json:"envSourceContainerName,omitempty"`
}

type advancedConfig struct {
	HorizontalPodAutoscalerConfig *struct {
		Behavior *autoscalingv2.HorizontalPodAutoscalerBehavior `json:"behavior,omitempty"`
		Name     string                                         `json:"name,omitempty"`
	} `json:"horizontalPodAutoscalerConfig,omitempty"`
	RestoreToOriginalReplicaCount bool `json:"restoreToOriginalReplicaCount,omitempty"`
	ScalingModifiers              *struct {
		Formula          string                         `json:"formula,omitempty"`
		Target           string                         `json:"target,omitempty"`
		ActivationTarget string                         `json:"activationTarget,omitempty"`
		MetricType       autoscalingv2.MetricTargetType `json:"metricType,omitempty"`
	} `json:"scalingModifiers,omitempty"`
}

type scalingFallback struct {
	FailureThreshold int32  `json:"failureThreshold"`
	Replicas         int32  `json:"replicas"`
	Behavior         string `json:"behavior,omitempty"`
}

type scaleTrigger struct {
	Type              string                         `json:"type"`
	Name              string                         `json:"name,omitempty"`
	UseCachedMetrics  bool                           `json:"useCachedMetrics,omitempty"`
	Metadata          map[string]string              `json:"metadata"`
	AuthenticationRef *struct{ Name, Kind string }   `json:"authenticationRef,omitempty"`
	MetricType        autoscalingv2.MetricTargetType `json:"metricType,omitempty"`
}

// triggerMetadata lists, per trigger type used here, the metadata keys KEDA's scaler reads
// (keda.sh/docs/2.17/scalers) and the ones it requires. Metadata is a string map in the CRD, so
// a misspelt key would otherwise be ignored by KEDA without a word.
var triggerMetadata = map[string]struct{ known, required []string }{
	"prometheus": {
		known: []string{"serverAddress", "query", "threshold", "activationThreshold", "namespace", "customHeaders",
			"ignoreNullValues", "unsafeSsl", "queryParameters", "timeout", "authModes"},
		required: []string{"serverAddress", "query", "threshold"},
	},
	"redis-streams": {
		known: []string{"address", "addressFromEnv", "host", "hostFromEnv", "port", "portFromEnv", "stream", "consumerGroup",
			"pendingEntriesCount", "streamLength", "lagCount", "activationLagCount", "databaseIndex", "enableTLS",
			"unsafeSsl", "usernameFromEnv", "passwordFromEnv"},
		required: []string{"address", "stream", "consumerGroup", "lagCount"},
	},
	"cpu": {known: []string{"value", "containerName"}, required: []string{"value"}},
}

// checkTrigger reports what KEDA would ignore or refuse in one trigger.
func checkTrigger(tr scaleTrigger) []error {
	spec, ok := triggerMetadata[tr.Type]
	if !ok {
		return []error{fmt.Errorf("trigger %q: type %q has no metadata list in keda_test.go", tr.Name, tr.Type)}
	}
	var errs []error
	keys := make([]string, 0, len(tr.Metadata))
	for k := range tr.Metadata {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !slices.Contains(spec.known, k) {
			errs = append(errs, fmt.Errorf("trigger %q (%s): unknown metadata key %q", tr.Name, tr.Type, k))
		}
	}
	for _, k := range spec.required {
		if tr.Metadata[k] == "" {
			errs = append(errs, fmt.Errorf("trigger %q (%s): metadata %q is required", tr.Name, tr.Type, k))
		}
	}
	if tr.Type == "cpu" && tr.MetricType != autoscalingv2.UtilizationMetricType {
		errs = append(errs, fmt.Errorf("trigger %q: cpu needs metricType Utilization", tr.Name))
	}
	return errs
}
