package deploy_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	strictjson "sigs.k8s.io/json"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// overlays are the directories an operator applies; each must build and pass every check.
var overlays = []string{"overlays/dev", "overlays/production"}

// built is one overlay's kustomize output, every object decoded into its type.
type built struct {
	dir     string
	objects []object
	docs    [][]byte // the objects' YAML, in the build's order
	// prefix is what precedes the base's object names: "" for kustomize, the release name and
	// a dash for the Helm chart.
	prefix string

	namespaces      []*corev1.Namespace
	deployments     []*appsv1.Deployment
	serviceAccounts []*corev1.ServiceAccount
	configMaps      []*corev1.ConfigMap
	secrets         []*corev1.Secret
	services        []*corev1.Service
	pdbs            []*policyv1.PodDisruptionBudget
	netpols         []*networkingv1.NetworkPolicy
	podMonitors     []*monitoringv1.PodMonitor
	rules           []*monitoringv1.PrometheusRule
	scaledObjects   []*scaledObject
}

type object struct {
	kind, name, namespace string
}

var (
	buildOnce  = map[string]*sync.Once{}
	buildCache = map[string]*built{}
	buildErr   = map[string]error{}
	buildMu    sync.Mutex
)

// build runs kustomize (as a library, the same code as `kubectl apply -k`) on dir, relative to
// deploy/, once per test binary, and decodes the result strictly.
func build(t *testing.T, dir string) *built {
	t.Helper()
	buildMu.Lock()
	once, ok := buildOnce[dir]
	if !ok {
		once = new(sync.Once)
		buildOnce[dir] = once
	}
	buildMu.Unlock()
	once.Do(func() {
		b, err := buildDir(dir)
		buildMu.Lock()
		buildCache[dir], buildErr[dir] = b, err
		buildMu.Unlock()
	})
	buildMu.Lock()
	defer buildMu.Unlock()
	if err := buildErr[dir]; err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	return buildCache[dir]
}

func buildDir(dir string) (*built, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	res, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, err
	}
	b := &built{dir: dir}
	for _, r := range res.Resources() {
		y, err := r.AsYAML()
		if err != nil {
			return nil, err
		}
		if err := b.add(y); err != nil {
			return nil, fmt.Errorf("%s %s: %w", r.GetKind(), r.GetName(), err)
		}
		b.docs = append(b.docs, y)
	}
	return b, nil
}

// decodeStrict turns YAML into v the way the API server's strict field validation does: an
// unknown or duplicated field, or one spelt with the wrong case, is an error.
func decodeStrict(y []byte, v any) error {
	j, err := yaml.YAMLToJSON(y)
	if err != nil {
		return err
	}
	strictErrs, err := strictjson.UnmarshalStrict(j, v)
	if err != nil {
		return err
	}
	if len(strictErrs) > 0 {
		return fmt.Errorf("strict decoding: %v", strictErrs)
	}
	return nil
}

func (b *built) add(y []byte) error {
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name      string            `json:"name"`
			Namespace string            `json:"namespace"`
			Labels    map[string]string `json:"labels"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal(y, &head); err != nil {
		return err
	}
	if errs := validation.IsDNS1123Subdomain(head.Metadata.Name); len(errs) > 0 {
		return fmt.Errorf("name %q: %v", head.Metadata.Name, errs)
	}
	for k, v := range head.Metadata.Labels {
		if errs := append(validation.IsQualifiedName(k), validation.IsValidLabelValue(v)...); len(errs) > 0 {
			return fmt.Errorf("label %s=%s: %v", k, v, errs)
		}
	}
	want := map[string]string{
		"Namespace": "v1", "ServiceAccount": "v1", "ConfigMap": "v1", "Secret": "v1", "Service": "v1",
		"Deployment": "apps/v1", "PodDisruptionBudget": "policy/v1", "NetworkPolicy": "networking.k8s.io/v1",
		"PodMonitor": "monitoring.coreos.com/v1", "PrometheusRule": "monitoring.coreos.com/v1",
		"ScaledObject": "keda.sh/v1alpha1",
	}
	if v, ok := want[head.Kind]; !ok {
		return fmt.Errorf("kind %s has no check here: add its type to deploy/build_test.go", head.Kind)
	} else if v != head.APIVersion {
		return fmt.Errorf("apiVersion %s, want %s", head.APIVersion, v)
	}
	var err error
	switch head.Kind {
	case "Namespace":
		err = decodeInto(y, &b.namespaces)
	case "ServiceAccount":
		err = decodeInto(y, &b.serviceAccounts)
	case "ConfigMap":
		err = decodeInto(y, &b.configMaps)
	case "Secret":
		err = decodeInto(y, &b.secrets)
	case "Service":
		err = decodeInto(y, &b.services)
	case "Deployment":
		err = decodeInto(y, &b.deployments)
	case "PodDisruptionBudget":
		err = decodeInto(y, &b.pdbs)
	case "NetworkPolicy":
		err = decodeInto(y, &b.netpols)
	case "PodMonitor":
		err = decodeInto(y, &b.podMonitors)
	case "PrometheusRule":
		err = decodeInto(y, &b.rules)
	case "ScaledObject":
		err = decodeInto(y, &b.scaledObjects)
	}
	if err != nil {
		return err
	}
	b.objects = append(b.objects, object{kind: head.Kind, name: head.Metadata.Name, namespace: head.Metadata.Namespace})
	return nil
}

func decodeInto[T any](y []byte, list *[]*T) error {
	v := new(T)
	if err := decodeStrict(y, v); err != nil {
		return err
	}
	*list = append(*list, v)
	return nil
}

// worker returns the overlay's worker Deployment and its container.
func (b *built) worker(t *testing.T) (*appsv1.Deployment, *corev1.Container) {
	t.Helper()
	for _, d := range b.deployments {
		if d.Name == b.prefix+"gateway-worker" {
			for i := range d.Spec.Template.Spec.Containers {
				if c := &d.Spec.Template.Spec.Containers[i]; c.Name == "worker" {
					return d, c
				}
			}
			t.Fatalf("%s: Deployment %sgateway-worker has no container named worker", b.dir, b.prefix)
		}
	}
	t.Fatalf("%s: no Deployment %sgateway-worker", b.dir, b.prefix)
	return nil, nil
}

func (b *built) configMap(t *testing.T, name string) *corev1.ConfigMap {
	t.Helper()
	for _, c := range b.configMaps {
		if c.Name == b.prefix+name || generatedName(c.Name) == name {
			return c
		}
	}
	t.Fatalf("%s: no ConfigMap %s (names: %v)", b.dir, name, b.names("ConfigMap"))
	return nil
}

// generatedName strips the content hash kustomize appends to a generated ConfigMap's or
// Secret's name ("gateway-registry-fghh9fh525" -> "gateway-registry").
func generatedName(name string) string {
	i := strings.LastIndexByte(name, '-')
	if i < 0 || len(name)-i-1 != 10 {
		return name
	}
	return name[:i]
}

func (b *built) names(kind string) []string {
	var n []string
	for _, o := range b.objects {
		if o.kind == kind {
			n = append(n, o.name)
		}
	}
	sort.Strings(n)
	return n
}

// TestOverlaysBuild: every overlay (and the base) builds, and every object in it decodes
// strictly into its published type (k8s.io/api, prometheus-operator) or, for KEDA, the
// mirror in keda_test.go. A misspelt field, a field at the wrong level or an unknown kind
// fails here.
func TestOverlaysBuild(t *testing.T) {
	for _, dir := range append([]string{"base"}, overlays...) {
		t.Run(dir, func(t *testing.T) {
			b := build(t, dir)
			if len(b.objects) == 0 {
				t.Fatal("no objects")
			}
			ns := map[string]bool{}
			for _, o := range b.objects {
				if o.kind != "Namespace" {
					ns[o.namespace] = true
				}
			}
			if len(ns) != 1 || ns[""] {
				t.Errorf("objects span namespaces %v, want exactly one", ns)
			}
		})
	}
}

// TestBaseRegistryIsTheRepositorys: kustomize reads files only below the kustomization, so the
// base carries a copy of registry.yaml; it must be the repository's, byte for byte.
func TestBaseRegistryIsTheRepositorys(t *testing.T) {
	repo, err := os.ReadFile(filepath.Join("..", "registry.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	base, err := os.ReadFile(filepath.Join("base", "registry.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(repo, base) {
		t.Fatal("deploy/base/registry.yaml differs from registry.yaml: cp registry.yaml deploy/base/registry.yaml")
	}
}
