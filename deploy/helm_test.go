package deploy_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/releaseutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// chartDir is the Helm chart, relative to deploy/. Its default values render what the
// production overlay applies; TestChartIsTheProductionOverlay holds the two together.
const chartDir = "helm/webpush-gateway"

// chartRelease is the release name the tests install under; every object's name is it, a dash,
// and the kustomize base's name.
const chartRelease = "webpush"

// rendered is one render of the chart: the manifest as Helm would apply it, and its objects.
type rendered struct {
	manifest string
	docs     [][]byte                     // one YAML document per object, in Helm's order
	b        *built                       // the objects the kustomize checks know, decoded strictly
	external []*unstructured.Unstructured // ExternalSecrets, whose CRD is not imported: decoded leniently
}

// renderChart renders the chart as `helm install --dry-run=client` (and `helm template`) does:
// action.Install, client only, with the chart's default capabilities.
func renderChart(t *testing.T, release, namespace string, vals map[string]any) *rendered {
	t.Helper()
	r, err := renderChartErr(release, namespace, vals)
	if err != nil {
		t.Fatalf("helm install --dry-run %s -n %s: %v", release, namespace, err)
	}
	return r
}

func renderChartErr(release, namespace string, vals map[string]any) (*rendered, error) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		return nil, err
	}
	inst := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	inst.DryRun, inst.ClientOnly = true, true
	inst.ReleaseName, inst.Namespace = release, namespace
	if inst.KubeVersion, err = kubeVersion(); err != nil {
		return nil, err
	}
	rel, err := inst.Run(ch, vals)
	if err != nil {
		return nil, err
	}
	r := &rendered{manifest: rel.Manifest, b: &built{dir: chartDir + " (release " + release + ")", prefix: release + "-"}}
	split := releaseutil.SplitManifests(rel.Manifest)
	keys := make([]string, 0, len(split))
	for k := range split {
		keys = append(keys, k)
	}
	sort.Sort(releaseutil.BySplitManifestsOrder(keys))
	for _, k := range keys {
		doc := []byte(split[k])
		var head struct{ Kind string }
		if err := yaml.Unmarshal(doc, &head); err != nil {
			return nil, err
		}
		if head.Kind == "" {
			continue // a template that rendered nothing
		}
		r.docs = append(r.docs, doc)
		if head.Kind == "ExternalSecret" {
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal(doc, &u.Object); err != nil {
				return nil, fmt.Errorf("ExternalSecret: %w", err)
			}
			r.external = append(r.external, u)
			continue
		}
		if err := r.b.add(doc); err != nil {
			return nil, fmt.Errorf("%s: %w", head.Kind, err)
		}
	}
	return r, nil
}

// kubeVersion is the Kubernetes release of the k8s.io/api module the checks decode with
// (go.mod's API v0.N.x is Kubernetes 1.N.x): the cluster the chart is rendered and linted for.
func kubeVersion() (*chartutil.KubeVersion, error) {
	mod, err := os.ReadFile("go.mod")
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(mod), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "k8s.io/api" {
			if v, ok := strings.CutPrefix(f[1], "v0."); ok {
				return chartutil.ParseKubeVersion("v1." + v)
			}
		}
	}
	return nil, errors.New("go.mod requires no k8s.io/api v0.N")
}

// valuesFile reads one of the chart's example values files.
func valuesFile(t *testing.T, name string) map[string]any {
	t.Helper()
	vals, err := chartutil.ReadValuesFile(filepath.Join(chartDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return vals
}

// helmLabels are the labels the chart's objects carry beside the base's: Helm's release
// labels. They are the only labels the comparison with the overlay forgives.
var helmLabels = []string{"app.kubernetes.io/instance", "app.kubernetes.io/managed-by", "app.kubernetes.io/version", "helm.sh/chart"}

// releaseSelector is the label the chart adds to the worker's pods and to every selector of
// them, so that the selectors of one release never pick another's pods.
const releaseSelector = "app.kubernetes.io/instance"

// podChecksums are the pod template annotations that roll the fleet when the chart's
// ConfigMaps change (kustomize does it by the hash in the ConfigMaps' names).
var podChecksums = []string{"checksum/registry", "checksum/settings"}

// nameRefs are the fields, beside metadata.name, that name another object of the same
// release; the chart's values there carry the release prefix, kustomize's the content hash.
var nameRefs = map[string][][]string{
	"Deployment": {
		{"spec", "template", "spec", "serviceAccountName"},
		{"spec", "template", "spec", "volumes", "*", "configMap", "name"},
		{"spec", "template", "spec", "containers", "*", "envFrom", "*", "configMapRef", "name"},
	},
	"ScaledObject": {{"spec", "scaleTargetRef", "name"}},
}

// toMap turns one object's YAML into the generic form both sides are compared in.
func toMap(y []byte) (map[string]any, error) {
	j, err := yaml.YAMLToJSON(y)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	return m, json.Unmarshal(j, &m)
}

// editPath applies f to every string at path in v ("*" is every element of a list).
func editPath(v any, path []string, f func(string) (string, error)) error {
	if len(path) == 0 {
		return nil
	}
	switch x := v.(type) {
	case map[string]any:
		next, ok := x[path[0]]
		if !ok {
			return nil
		}
		if len(path) == 1 {
			s, isString := next.(string)
			if !isString {
				return fmt.Errorf("%s is not a string", path[0])
			}
			out, err := f(s)
			x[path[0]] = out
			return err
		}
		return editPath(next, path[1:], f)
	case []any:
		if path[0] != "*" {
			return fmt.Errorf("list where %s was expected", path[0])
		}
		for _, e := range x {
			if err := editPath(e, path[1:], f); err != nil {
				return err
			}
		}
	}
	return nil
}

// dropKeys removes keys from the map at path in obj, each of which must be there: what the
// comparison forgives is present on the chart's side, never merely allowed.
func dropKeys(obj map[string]any, path []string, keys ...string) error {
	var v any = obj
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: no map", strings.Join(path, "."))
		}
		v = m[p]
	}
	m, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("%s: no map", strings.Join(path, "."))
	}
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			return fmt.Errorf("%s: no %s", strings.Join(path, "."), k)
		}
		delete(m, k)
	}
	if len(m) == 0 && len(path) > 0 {
		parent := obj
		for _, p := range path[:len(path)-1] {
			parent = parent[p].(map[string]any)
		}
		delete(parent, path[len(path)-1])
	}
	return nil
}

// workerSelectors are the label maps that select the worker's pods, per kind.
var workerSelectors = map[string][][]string{
	"Deployment": {
		{"spec", "selector", "matchLabels"},
		{"spec", "template", "metadata", "labels"},
	},
	"PodDisruptionBudget": {{"spec", "selector", "matchLabels"}},
	"PodMonitor":          {{"spec", "selector", "matchLabels"}},
	"NetworkPolicy":       {{"spec", "podSelector", "matchLabels"}},
}

// chartAsOverlay undoes, on one rendered object, exactly the differences the chart is allowed
// to have from the overlay: the release prefix of its names, Helm's labels, the release label
// in the worker's selectors (the topology spread's too) and the checksum annotations.
func chartAsOverlay(kind string, obj map[string]any, prefix string) error {
	unprefix := func(s string) (string, error) {
		out, ok := strings.CutPrefix(s, prefix)
		if !ok {
			return s, fmt.Errorf("name %q lacks the release prefix %q", s, prefix)
		}
		return out, nil
	}
	if err := editPath(obj, []string{"metadata", "name"}, unprefix); err != nil {
		return err
	}
	for _, p := range nameRefs[kind] {
		if err := editPath(obj, p, unprefix); err != nil {
			return err
		}
	}
	if err := dropKeys(obj, []string{"metadata", "labels"}, helmLabels...); err != nil {
		return err
	}
	for _, p := range workerSelectors[kind] {
		if err := dropKeys(obj, p, releaseSelector); err != nil {
			return err
		}
	}
	if kind == "Deployment" {
		if err := dropKeys(obj, []string{"spec", "template", "metadata", "annotations"}, podChecksums...); err != nil {
			return err
		}
		spec := obj["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
		spread, _ := spec["topologySpreadConstraints"].([]any)
		for _, c := range spread {
			if err := dropKeys(c.(map[string]any), []string{"labelSelector", "matchLabels"}, releaseSelector); err != nil {
				return err
			}
		}
	}
	return nil
}

// overlayAsChart strips the content hash kustomize gives generated ConfigMaps from their names
// and from the references to them.
func overlayAsChart(kind string, obj map[string]any) error {
	unhash := func(s string) (string, error) { return generatedName(s), nil }
	if err := editPath(obj, []string{"metadata", "name"}, unhash); err != nil {
		return err
	}
	for _, p := range nameRefs[kind] {
		if err := editPath(obj, p, unhash); err != nil {
			return err
		}
	}
	return nil
}

// TestChartIsTheProductionOverlay: with its default values, the chart renders the objects
// `kubectl apply -k deploy/overlays/production` applies, object for object and field for
// field, except for what chartAsOverlay and overlayAsChart forgive by name (the release prefix,
// Helm's labels, the release label of the selectors, the checksum annotations, kustomize's name
// hashes) and the Namespace, which a Helm release does not own. Every check of the overlay thus
// holds for the chart, and a change to one without the other fails here.
func TestChartIsTheProductionOverlay(t *testing.T) {
	r := renderChart(t, chartRelease, "webpush-gateway", nil)
	for _, err := range compareWithOverlay(t, build(t, "overlays/production"), r) {
		t.Error(err)
	}
}

// compareWithOverlay lists every difference between a render of the chart and an overlay's
// build beyond what chartAsOverlay and overlayAsChart forgive.
func compareWithOverlay(t *testing.T, ov *built, r *rendered) []error {
	t.Helper()
	want := map[string]map[string]any{}
	for _, y := range ov.docs {
		obj, err := toMap(y)
		if err != nil {
			t.Fatal(err)
		}
		kind := obj["kind"].(string)
		if kind == "Namespace" {
			continue
		}
		if err := overlayAsChart(kind, obj); err != nil {
			t.Fatal(err)
		}
		want[kind+"/"+obj["metadata"].(map[string]any)["name"].(string)] = obj
	}
	if len(want) < 8 || len(ov.objects) != len(want)+1 {
		t.Fatalf("the overlay has %d objects besides its Namespace (of %d): the comparison is broken", len(want), len(ov.objects))
	}
	var errs []error
	got := map[string]map[string]any{}
	for _, y := range r.docs {
		obj, err := toMap(y)
		if err != nil {
			t.Fatal(err)
		}
		kind := obj["kind"].(string)
		if err := chartAsOverlay(kind, obj, r.b.prefix); err != nil {
			errs = append(errs, fmt.Errorf("%s %v: %w", kind, obj["metadata"], err))
			continue
		}
		got[kind+"/"+obj["metadata"].(map[string]any)["name"].(string)] = obj
	}
	keys := make([]string, 0, len(want))
	for key := range want {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	for _, key := range keys {
		g, ok := got[key]
		if !ok {
			errs = append(errs, fmt.Errorf("%s: in the overlay, not rendered by the chart", key))
			continue
		}
		if d := cmp.Diff(want[key], g); d != "" {
			errs = append(errs, fmt.Errorf("%s: the chart differs from the overlay (-overlay +chart):\n%s", key, d))
		}
	}
	for key := range got {
		if _, ok := want[key]; !ok {
			errs = append(errs, fmt.Errorf("%s: rendered by the chart, not in the overlay", key))
		}
	}
	return errs
}

// TestChartComparisonCatchesDrift: a setting changed on one side only, an object only one side
// has, and a label the comparison does not forgive are each reported.
func TestChartComparisonCatchesDrift(t *testing.T) {
	ov := build(t, "overlays/production")
	for _, tc := range []struct {
		name string
		vals map[string]any
		want string
	}{
		{"grace", map[string]any{"grace": "30s"}, "Deployment/gateway-worker: the chart differs"},
		{"shards", map[string]any{"settings": map[string]any{"shards": 12}}, "ConfigMap/gateway-worker-settings: the chart differs"},
		{"scaler maximum", map[string]any{"keda": map[string]any{"maxReplicaCount": 13}}, "ScaledObject/gateway-worker: the chart differs"},
		{"no PodMonitor", map[string]any{"podMonitor": map[string]any{"enabled": false}}, "PodMonitor/gateway-worker: in the overlay, not rendered"},
		{"an ExternalSecret", valuesFile(t, "examples/values-external-secrets.yaml"), "ExternalSecret/gateway-vapid: rendered by the chart, not in the overlay"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := renderChart(t, chartRelease, "webpush-gateway", tc.vals)
			if err := errors.Join(compareWithOverlay(t, ov, r)...); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("comparison gave %v, want an error mentioning %q", err, tc.want)
			}
		})
	}
	t.Run("label", func(t *testing.T) {
		r := renderChart(t, chartRelease, "webpush-gateway", nil)
		r.docs = slices.Clone(r.docs)
		for i, d := range r.docs {
			if bytes.Contains(d, []byte("kind: PodDisruptionBudget")) {
				r.docs[i] = bytes.Replace(d, []byte("  labels:\n"), []byte("  labels:\n    team: push\n"), 1)
			}
		}
		if err := errors.Join(compareWithOverlay(t, ov, r)...); err == nil || !strings.Contains(err.Error(), "PodDisruptionBudget/gateway-worker: the chart differs") {
			t.Fatalf("comparison gave %v, want the PDB's extra label reported", err)
		}
	})
}

// TestChartVersionIsTheRelease: Chart.yaml's appVersion is the VERSION file's release (the
// image tag the chart pulls by default) and its version the same without the "v" Helm's SemVer
// does without.
func TestChartVersionIsTheRelease(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	version := strings.TrimSpace(string(raw))
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	if ch.Metadata.AppVersion != version {
		t.Errorf("Chart.yaml appVersion %q, VERSION %q", ch.Metadata.AppVersion, version)
	}
	if want := strings.TrimPrefix(version, "v"); ch.Metadata.Version != want {
		t.Errorf("Chart.yaml version %q, want %q (VERSION %q without the v)", ch.Metadata.Version, want, version)
	}
}

// TestChartFilesAreTheBases: the chart carries the provider table and the alert rules as files
// (Helm reads nothing outside the chart); they must be the repository's and the base's, byte for
// byte.
func TestChartFilesAreTheBases(t *testing.T) {
	for chartFile, source := range map[string]string{
		"files/registry.yaml":       filepath.Join("..", "registry.yaml"),
		"files/prometheusrule.yaml": filepath.Join("base", "prometheusrule.yaml"),
	} {
		want, err := os.ReadFile(source)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(chartDir, chartFile))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(want, got) {
			t.Errorf("%s/%s differs from %s: cp %s deploy/%s/%s", chartDir, chartFile, source, strings.TrimPrefix(source, "../"), chartDir, chartFile)
		}
	}
}
