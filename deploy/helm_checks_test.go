package deploy_test

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chartutil"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/webpush-gateway/webpush-gateway/internal/testsupport/doctest"
)

// chartValuesFiles are the example values files of the chart; each must lint and render into
// objects that pass the checks.
func chartValuesFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(chartDir, "examples", "values-*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples/values-*.yaml in %s: %v", chartDir, err)
	}
	for i, f := range files {
		files[i], _ = filepath.Rel(chartDir, f)
	}
	return files
}

// TestChartLint: `helm lint --strict` (action.Lint, warnings fail too) passes with the default
// values and with every example values file.
func TestChartLint(t *testing.T) {
	kv, err := kubeVersion()
	if err != nil {
		t.Fatal(err)
	}
	for _, vf := range append([]string{""}, chartValuesFiles(t)...) {
		t.Run("values="+vf, func(t *testing.T) {
			var vals map[string]any
			if vf != "" {
				vals = valuesFile(t, vf)
			}
			lint := action.NewLint()
			lint.Strict, lint.Namespace, lint.KubeVersion = true, "webpush-gateway", kv
			res := lint.Run([]string{chartDir}, vals)
			if res.TotalChartsLinted != 1 {
				t.Errorf("linted %d charts, want 1", res.TotalChartsLinted)
			}
			for _, err := range res.Errors {
				t.Error(err)
			}
			for _, m := range res.Messages {
				t.Log(m)
			}
		})
	}
}

// TestChartRenders: the chart rendered with its defaults, with every example values file (under
// another release and namespace), and without the KEDA and Prometheus operator objects passes
// the overlays' checks: strict decoding, the worker's pod contract, Pod Security restricted,
// the NetworkPolicy, selectors, the ScaledObject's triggers and query, promtool's rule check,
// and the ExternalSecret's fields. No render holds a Secret or a key.
func TestChartRenders(t *testing.T) {
	type variant struct {
		name, release, namespace string
		vals                     map[string]any
	}
	variants := []variant{{"defaults", chartRelease, "webpush-gateway", nil}}
	for _, vf := range chartValuesFiles(t) {
		variants = append(variants, variant{vf, "eu", "push-eu", valuesFile(t, vf)})
	}
	variants = append(variants, variant{"without KEDA and the Prometheus operator", "small", "push-small", map[string]any{
		"keda": map[string]any{"enabled": false}, "replicas": 2,
		"podMonitor": map[string]any{"enabled": false}, "prometheusRule": map[string]any{"enabled": false},
		"settings": map[string]any{"shards": 2, "extra": map[string]any{"GATEWAY_PREFIX": "small:"}},
		"image":    map[string]any{"digest": "sha256:" + strings.Repeat("ab", 32)},
	}})
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			r := renderChart(t, v.release, v.namespace, v.vals)
			b := r.b
			for _, o := range b.objects {
				if o.namespace != v.namespace {
					t.Errorf("%s %s in namespace %q, want the release's %q", o.kind, o.name, o.namespace, v.namespace)
				}
				if o.kind == "Secret" {
					t.Errorf("the chart renders Secret %s: keys come from an existing Secret only", o.name)
				}
			}
			if strings.Contains(r.manifest, "PRIVATE KEY") {
				t.Error("the rendered manifest holds a private key")
			}
			d, c := b.worker(t)
			keda := len(b.scaledObjects) == 1
			for _, err := range checkFilesMounted(t, b, d, c) {
				t.Error(err)
			}
			for _, err := range checkWorkerPod(t, b, d, c) {
				if !keda && strings.Contains(err.Error(), "KEDA owns") {
					continue // without KEDA the Deployment holds the count
				}
				t.Error(err)
			}
			if !keda && (d.Spec.Replicas == nil || *d.Spec.Replicas != 2) {
				t.Errorf("without KEDA, replicas %v, want the value's 2", derefInt32(d.Spec.Replicas))
			}
			if err := restricted(&d.Spec.Template.ObjectMeta, &d.Spec.Template.Spec); err != nil {
				t.Errorf("Deployment %s: %v", d.Name, err)
			}
			pods := labels.Set(d.Spec.Template.Labels)
			if pods["app.kubernetes.io/instance"] != v.release {
				t.Errorf("pod labels %v lack the release", pods)
			}
			matches := func(what string, sel *metav1.LabelSelector) {
				s, err := metav1.LabelSelectorAsSelector(sel)
				if err != nil || s.Empty() || !s.Matches(pods) || s.Matches(labels.Set{"app.kubernetes.io/name": "gateway-worker", "app.kubernetes.io/instance": "another"}) {
					t.Errorf("%s selector %v: want this release's pods %v and no other release's", what, sel, pods)
				}
			}
			matches("Deployment", d.Spec.Selector)
			matches("PodDisruptionBudget", b.pdbs[0].Spec.Selector)
			matches("NetworkPolicy", &b.netpols[0].Spec.PodSelector)
			// Behind an egress proxy the policy lets the worker out to the proxy alone.
			npErrs := checkNetworkPolicy(b.netpols[0])
			if proxy := env(t, b, c)["GATEWAY_PROXY"]; proxy != "" {
				npErrs = checkProxyPolicy(b.netpols[0], proxy)
			}
			for _, err := range npErrs {
				t.Error(err)
			}
			if sa := b.serviceAccounts[0]; d.Spec.Template.Spec.ServiceAccountName != sa.Name {
				t.Errorf("pod uses service account %q, the chart makes %q", d.Spec.Template.Spec.ServiceAccountName, sa.Name)
			}
			e := env(t, b, c)
			if v.release == "small" {
				for k, want := range map[string]string{"GATEWAY_SHARDS": "2", "GATEWAY_PREFIX": "small:"} {
					if e[k] != want {
						t.Errorf("%s %q, want %q from the values", k, e[k], want)
					}
				}
				if !strings.HasSuffix(c.Image, "@sha256:"+strings.Repeat("ab", 32)) {
					t.Errorf("image %q does not pin the values' digest", c.Image)
				}
			}
			if len(b.podMonitors) == 1 {
				matches("PodMonitor", &b.podMonitors[0].Spec.Selector)
			}
			if len(b.rules) == 1 {
				checkRulesNamespace(t, b, v.namespace)
				tmp := t.TempDir()
				writeRules(t, b, tmp)
				runPromtool(t, tmp, "check", "rules", "rules.yaml")
			}
			if keda {
				so := b.scaledObjects[0]
				if so.Spec.ScaleTargetRef == nil || so.Spec.ScaleTargetRef.Name != d.Name {
					t.Errorf("ScaledObject targets %+v, want %s", so.Spec.ScaleTargetRef, d.Name)
				}
				for _, tr := range so.Spec.Triggers {
					for _, err := range checkTrigger(tr) {
						t.Error(err)
					}
					if tr.Type == "prometheus" {
						for _, err := range checkPrometheusTrigger(b, so, tr, registryOf(t, b).IDs()) {
							t.Error(err)
						}
					}
				}
			}
			for _, es := range r.external {
				for _, err := range checkExternalSecret(es, d, e) {
					t.Error(err)
				}
			}
		})
	}
}

// checkRulesNamespace: the PromQL that names a namespace names the release's.
func checkRulesNamespace(t *testing.T, b *built, namespace string) {
	t.Helper()
	exprs, _ := ruleExprs(b.rules[0])
	named := 0
	for k, expr := range exprs {
		for _, rest := range strings.Split(expr, `namespace="`)[1:] {
			named++
			if ns, _, _ := strings.Cut(rest, `"`); ns != namespace {
				t.Errorf("%s selects namespace %q, the release is in %q", k, ns, namespace)
			}
		}
	}
	if named == 0 {
		t.Error("no rule names the namespace: the no-replicas alert must")
	}
}

// externalSecretFields are the fields of External Secrets' ExternalSecret (external-secrets.io/v1,
// apis/externalsecrets/v1/externalsecret_types.go in github.com/external-secrets/external-secrets)
// that these manifests may use. The CRD's module is not imported, so the object is decoded as
// unstructured and checked against this list.
var externalSecretFields = map[string][]string{
	"spec":           {"secretStoreRef", "target", "refreshPolicy", "refreshInterval", "data", "dataFrom"},
	"secretStoreRef": {"name", "kind"},
	"target":         {"name", "creationPolicy", "deletionPolicy", "template", "immutable"},
	"data":           {"secretKey", "remoteRef", "sourceRef"},
	"remoteRef":      {"key", "property", "version", "metadataPolicy", "decodingStrategy", "conversionStrategy"},
}

// checkExternalSecret: an ExternalSecret that writes the Secret the worker mounts, with one
// entry per key file GATEWAY_VAPID_KEY names, each fetched from a store.
func checkExternalSecret(es *unstructured.Unstructured, d *appsv1.Deployment, e map[string]string) []error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("ExternalSecret %s: "+format, append([]any{es.GetName()}, args...)...))
	}
	if es.GetAPIVersion() != "external-secrets.io/v1" || es.GetKind() != "ExternalSecret" {
		bad("%s %s, want external-secrets.io/v1 ExternalSecret", es.GetAPIVersion(), es.GetKind())
	}
	known := func(what string, m map[string]any) {
		for k := range m {
			if !slices.Contains(externalSecretFields[what], k) {
				bad("%s has unknown field %q", what, k)
			}
		}
	}
	spec, _, _ := unstructured.NestedMap(es.Object, "spec")
	known("spec", spec)
	store, _, _ := unstructured.NestedMap(spec, "secretStoreRef")
	known("secretStoreRef", store)
	if store["name"] == nil || store["name"] == "" || (store["kind"] != "SecretStore" && store["kind"] != "ClusterSecretStore") {
		bad("secretStoreRef %v: want a name and kind SecretStore or ClusterSecretStore", store)
	}
	if ri, ok := spec["refreshInterval"].(string); ok {
		if dur, err := time.ParseDuration(ri); err != nil || dur <= 0 {
			bad("refreshInterval %q is not a positive duration", ri)
		}
	}
	target, _, _ := unstructured.NestedMap(spec, "target")
	known("target", target)
	var mounted []string
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Secret != nil {
			mounted = append(mounted, v.Secret.SecretName)
		}
	}
	if len(mounted) != 1 || target["name"] != mounted[0] {
		bad("target %v is not the Secret the worker mounts, %v", target["name"], mounted)
	}
	if cp, ok := target["creationPolicy"]; ok && cp != "Owner" && cp != "Orphan" && cp != "Merge" {
		bad("creationPolicy %v", cp)
	}
	want := map[string]bool{}
	for _, k := range strings.Split(e["GATEWAY_VAPID_KEY"], ",") {
		_, file, _ := strings.Cut(k, "=")
		want[path.Base(file)] = true
	}
	data, _, _ := unstructured.NestedSlice(spec, "data")
	got := map[string]bool{}
	for i, raw := range data {
		entry, _ := raw.(map[string]any)
		known("data", entry)
		ref, _ := entry["remoteRef"].(map[string]any)
		known("remoteRef", ref)
		key, _ := entry["secretKey"].(string)
		if key == "" || ref["key"] == nil || ref["key"] == "" {
			bad("data[%d] %v: want a secretKey and a remoteRef key", i, entry)
		}
		got[key] = true
	}
	for k := range want {
		if !got[k] {
			bad("no data entry for %s, a key file of GATEWAY_VAPID_KEY", k)
		}
	}
	for k := range got {
		if !want[k] {
			bad("data entry %s is no key file of GATEWAY_VAPID_KEY %q", k, e["GATEWAY_VAPID_KEY"])
		}
	}
	return errs
}

// TestExternalSecretExample: the ExternalSecret of examples/externalsecret.yaml, for installs
// that apply it themselves, makes the Secret the chart's default values mount, with the key
// files they name.
func TestExternalSecretExample(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(chartDir, "examples", "externalsecret.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	es := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(raw, &es.Object); err != nil {
		t.Fatal(err)
	}
	r := renderChart(t, chartRelease, es.GetNamespace(), nil)
	d, c := r.b.worker(t)
	for _, err := range checkExternalSecret(es, d, env(t, r.b, c)) {
		t.Error(err)
	}
}

// TestExternalSecretChecksCatchBreakage: an ExternalSecret that writes another Secret, misses
// a key file, names one the worker does not read, or misspells a field is refused.
func TestExternalSecretChecksCatchBreakage(t *testing.T) {
	r := renderChart(t, chartRelease, "webpush-gateway", valuesFile(t, "examples/values-external-secrets.yaml"))
	if len(r.external) != 1 {
		t.Fatalf("%d ExternalSecrets rendered, want 1", len(r.external))
	}
	d, c := r.b.worker(t)
	e := env(t, r.b, c)
	for _, tc := range []struct {
		name   string
		mutate func(spec map[string]any)
		want   string
	}{
		{"another target", func(spec map[string]any) { spec["target"].(map[string]any)["name"] = "vapid" }, "not the Secret the worker mounts"},
		{"a key file missing", func(spec map[string]any) { spec["data"] = spec["data"].([]any)[:1] }, "no data entry for next.pem"},
		{"a key file too many", func(spec map[string]any) {
			spec["data"] = append(spec["data"].([]any), map[string]any{"secretKey": "old.pem", "remoteRef": map[string]any{"key": "k"}})
		}, "data entry old.pem"},
		{"a misspelt field", func(spec map[string]any) { spec["refreshIntervall"] = "1h" }, `unknown field "refreshIntervall"`},
		{"no store", func(spec map[string]any) { delete(spec, "secretStoreRef") }, "secretStoreRef"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			es := r.external[0].DeepCopy()
			tc.mutate(es.Object["spec"].(map[string]any))
			if err := errors.Join(checkExternalSecret(es, d, e)...); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("checks gave %v, want an error mentioning %q", err, tc.want)
			}
		})
	}
}

// TestChartRefusesIncompleteValues: values that would deploy a fleet without its keys, or an
// ExternalSecret that leaves a key file out, fail the install with the value to fix.
func TestChartRefusesIncompleteValues(t *testing.T) {
	es := valuesFile(t, "examples/values-external-secrets.yaml")
	vapid := es["vapid"].(map[string]any)
	ext := vapid["externalSecret"].(map[string]any)
	ext["data"] = ext["data"].([]any)[:1]
	for _, tc := range []struct {
		name string
		vals map[string]any
		want string
	}{
		{"no VAPID Secret", map[string]any{"vapid": map[string]any{"existingSecret": ""}}, "vapid.existingSecret"},
		{"no keys", map[string]any{"vapid": map[string]any{"keys": nil}}, "vapid.keys"},
		{"no Redis Secret", map[string]any{"redis": map[string]any{"existingSecret": ""}}, "redis.existingSecret"},
		{"no subject", map[string]any{"settings": map[string]any{"subject": ""}}, "settings.subject"},
		{"ExternalSecret without a key file", es, "no entry for secretKey next.pem"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := renderChartErr(chartRelease, "webpush-gateway", tc.vals)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("install gave %v, want an error naming %q", err, tc.want)
			}
		})
	}
}

// TestDocsExternalSecretValues: the values block of docs/deploy.md ("VAPID keys from External
// Secrets") installs as pasted, and its ExternalSecret makes the Secret the worker mounts.
func TestDocsExternalSecretValues(t *testing.T) {
	block := doctest.MarkdownBlock(t, "../docs/deploy.md", "### VAPID keys from External Secrets", "yaml")
	vals, err := chartutil.ReadValues([]byte(block))
	if err != nil {
		t.Fatal(err)
	}
	r := renderChart(t, chartRelease, "webpush-gateway", vals)
	if len(r.external) != 1 {
		t.Fatalf("%d ExternalSecrets rendered, want 1", len(r.external))
	}
	d, c := r.b.worker(t)
	for _, err := range checkExternalSecret(r.external[0], d, env(t, r.b, c)) {
		t.Error(err)
	}
}
