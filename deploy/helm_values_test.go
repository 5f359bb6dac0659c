package deploy_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/webpush-gateway/webpush-gateway/deploy/release"
)

// lintChart is `helm lint --strict` (action.Lint) of the chart with vals: its errors, warnings
// counting as errors.
func lintChart(t *testing.T, vals map[string]any) []error {
	t.Helper()
	kv, err := kubeVersion()
	if err != nil {
		t.Fatal(err)
	}
	lint := action.NewLint()
	lint.Strict, lint.Namespace, lint.KubeVersion = true, "webpush-gateway", kv
	res := lint.Run([]string{chartDir}, vals)
	if res.TotalChartsLinted != 1 {
		t.Fatalf("linted %d charts, want 1", res.TotalChartsLinted)
	}
	return res.Errors
}

// checkFilesMounted: every file the worker is told to read through a GATEWAY_..._FILE
// variable lies under one of its volume mounts, and that mount's volume is in the pod. A file
// under no mount is the pod that starts, finds nothing and crash-loops.
func checkFilesMounted(t *testing.T, b *built, d *appsv1.Deployment, c *corev1.Container) []error {
	t.Helper()
	var errs []error
	volumes := map[string]bool{}
	for _, v := range d.Spec.Template.Spec.Volumes {
		volumes[v.Name] = true
	}
	for _, m := range c.VolumeMounts {
		if !volumes[m.Name] {
			errs = append(errs, fmt.Errorf("volume mount %s at %s names no volume of the pod", m.Name, m.MountPath))
		}
	}
	for name, file := range env(t, b, c) {
		if !strings.HasSuffix(name, "_FILE") || strings.HasPrefix(file, "<") {
			continue
		}
		if mountOf(c, file) == nil {
			errs = append(errs, fmt.Errorf("%s %s is under no volume mount", name, file))
		}
	}
	return errs
}

// mountOf is the container's mount that holds file, nil when none does.
func mountOf(c *corev1.Container, file string) *corev1.VolumeMount {
	for i, m := range c.VolumeMounts {
		if strings.HasPrefix(path.Clean(file), strings.TrimSuffix(m.MountPath, "/")+"/") {
			return &c.VolumeMounts[i]
		}
	}
	return nil
}

// sameJSON reports whether a value of the values file and the field it was rendered into are
// the same JSON.
func sameJSON(t *testing.T, value, field any) bool {
	t.Helper()
	a, err := json.Marshal(value)
	if err != nil {
		t.Fatal(err)
	}
	var typed any = reflect.New(reflect.TypeOf(field)).Interface()
	if err := json.Unmarshal(a, typed); err != nil {
		t.Fatalf("%s does not decode into %T: %v", a, field, err)
	}
	return reflect.DeepEqual(reflect.ValueOf(typed).Elem().Interface(), field)
}

// TestChartAdopterValues: the values of examples/values-egress-proxy.yaml, the fleet as an
// adopter runs it (a private mirror, dedicated nodes, a cloud identity, proxy credentials from a
// Secret mounted as a file), each reach the object they configure; the credentials file is on
// the Secret's mount; the NetworkPolicy lets the worker out only to the proxy; the pod passes
// Pod Security restricted. TestChartRenders decodes every object strictly.
func TestChartAdopterValues(t *testing.T) {
	vals := valuesFile(t, "examples/values-egress-proxy.yaml")
	r := renderChart(t, "eu", "push-eu", vals)
	d, c := r.b.worker(t)
	pod := d.Spec.Template.Spec
	for _, tc := range []struct {
		key   string
		field any
	}{
		{"imagePullSecrets", pod.ImagePullSecrets},
		{"nodeSelector", pod.NodeSelector},
		{"tolerations", pod.Tolerations},
		{"affinity", *pod.Affinity},
		{"extraVolumes", pod.Volumes[len(pod.Volumes)-1:]},
		{"extraVolumeMounts", c.VolumeMounts[len(c.VolumeMounts)-1:]},
		{"extraEnv", c.Env[len(c.Env)-1:]},
		{"priorityClassName", pod.PriorityClassName},
	} {
		if !sameJSON(t, vals[tc.key], tc.field) {
			t.Errorf("%s %v rendered as %+v", tc.key, vals[tc.key], tc.field)
		}
	}
	if !strings.HasPrefix(c.Image, "registry.example.com/mirror/gateway-worker:") {
		t.Errorf("image %s is not the mirror's", c.Image)
	}
	for k, v := range vals["podAnnotations"].(map[string]any) {
		if d.Spec.Template.Annotations[k] != v {
			t.Errorf("pod annotation %s = %q, want %q", k, d.Spec.Template.Annotations[k], v)
		}
	}
	if d.Spec.Template.Labels["team"] != "push" || d.Spec.Selector.MatchLabels["team"] != "" {
		t.Errorf("pod labels %v, selector %v: want team=push on the pods only", d.Spec.Template.Labels, d.Spec.Selector.MatchLabels)
	}
	if sa := r.b.serviceAccounts[0]; sa.Annotations["iam.gke.io/gcp-service-account"] == "" || pod.ServiceAccountName != sa.Name {
		t.Errorf("ServiceAccount %s annotations %v, pod's account %s", sa.Name, sa.Annotations, pod.ServiceAccountName)
	}
	if r.b.podMonitors[0].Labels["release"] != "prometheus" || r.b.rules[0].Labels["release"] != "prometheus" {
		t.Errorf("PodMonitor labels %v, PrometheusRule labels %v: want release=prometheus", r.b.podMonitors[0].Labels, r.b.rules[0].Labels)
	}

	e := env(t, r.b, c)
	creds := e["GATEWAY_PROXY_CREDENTIALS_FILE"]
	m := mountOf(c, creds)
	if creds == "" || m == nil || !m.ReadOnly {
		t.Fatalf("GATEWAY_PROXY_CREDENTIALS_FILE %q is on no read-only mount of %v", creds, c.VolumeMounts)
	}
	for _, v := range pod.Volumes {
		if v.Name == m.Name && (v.Secret == nil || v.Secret.SecretName != "egress-proxy-credentials") {
			t.Errorf("the credentials' volume %s is not the Secret egress-proxy-credentials: %+v", v.Name, v.VolumeSource)
		}
	}
	if e["GATEWAY_PREFIX"] != "<secret gateway-tenant/prefix>" {
		t.Errorf("GATEWAY_PREFIX %q, want the tenant Secret's prefix", e["GATEWAY_PREFIX"])
	}
	for _, err := range append(checkFilesMounted(t, r.b, d, c), checkProxyPolicy(r.b.netpols[0], e["GATEWAY_PROXY"])...) {
		t.Error(err)
	}
	if err := restricted(&d.Spec.Template.ObjectMeta, &pod); err != nil {
		t.Error(err)
	}
	for _, err := range lintChart(t, vals) {
		t.Error(err)
	}
}

// TestChartFileChecksCatchBreakage: the checks above see a file under no mount, and a mount
// of no volume.
func TestChartFileChecksCatchBreakage(t *testing.T) {
	r := renderChart(t, "eu", "push-eu", valuesFile(t, "examples/values-egress-proxy.yaml"))
	d, c := r.b.worker(t)
	d, c = d.DeepCopy(), c.DeepCopy()
	c.VolumeMounts = c.VolumeMounts[:len(c.VolumeMounts)-1]
	if err := errors.Join(checkFilesMounted(t, r.b, d, c)...); err == nil || !strings.Contains(err.Error(), "GATEWAY_PROXY_CREDENTIALS_FILE") {
		t.Errorf("checks gave %v, want the credentials file under no mount", err)
	}
	d.Spec.Template.Spec.Volumes = d.Spec.Template.Spec.Volumes[:1]
	if err := errors.Join(checkFilesMounted(t, r.b, d, c)...); err == nil || !strings.Contains(err.Error(), "names no volume") {
		t.Errorf("checks gave %v, want the vapid mount without its volume", err)
	}
}

// TestChartRefusesBrokenPods: values that would start pods that cannot run, or that would take
// the chart's own labels and annotations, fail the install with the value to fix.
func TestChartRefusesBrokenPods(t *testing.T) {
	for _, tc := range []struct {
		name string
		vals map[string]any
		want string
	}{
		{"a credentials file on no volume", map[string]any{"settings": map[string]any{"extra": map[string]any{
			"GATEWAY_PROXY_CREDENTIALS_FILE": "/var/run/secrets/proxy/credentials"}}},
			"settings.extra.GATEWAY_PROXY_CREDENTIALS_FILE: /var/run/secrets/proxy/credentials is under no volume mount"},
		{"a file variable of extraEnv on no volume", map[string]any{"extraEnv": []any{map[string]any{"name": "GATEWAY_CA_FILE", "value": "/etc/ca/ca.pem"}}},
			"extraEnv GATEWAY_CA_FILE: /etc/ca/ca.pem is under no volume mount"},
		{"a mount of no volume", map[string]any{"extraVolumeMounts": []any{map[string]any{"name": "creds", "mountPath": "/creds"}}},
			"extraVolumeMounts: creds names no volume"},
		{"the selector's label", map[string]any{"podLabels": map[string]any{"app.kubernetes.io/instance": "other"}}, "podLabels: app.kubernetes.io/instance"},
		{"a checksum annotation", map[string]any{"podAnnotations": map[string]any{"checksum/registry": "x"}}, "podAnnotations: checksum/registry"},
		{"no account", map[string]any{"serviceAccount": map[string]any{"create": false}}, "serviceAccount.name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := renderChartErr(chartRelease, "webpush-gateway", tc.vals)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("install gave %v, want an error naming %q", err, tc.want)
			}
		})
	}
}

// TestChartExistingServiceAccount: with serviceAccount.create false the chart makes no
// ServiceAccount and the pods use the named one.
func TestChartExistingServiceAccount(t *testing.T) {
	r := renderChart(t, chartRelease, "webpush-gateway", map[string]any{"serviceAccount": map[string]any{"create": false, "name": "push-identity"}})
	d, _ := r.b.worker(t)
	if len(r.b.serviceAccounts) != 0 || d.Spec.Template.Spec.ServiceAccountName != "push-identity" {
		t.Errorf("%d ServiceAccounts rendered, pods use %q; want none and push-identity", len(r.b.serviceAccounts), d.Spec.Template.Spec.ServiceAccountName)
	}
}

// TestChartRejectsUnknownKeys: values.schema.json makes a misspelt key, at any depth, a wrong
// type, or a security setting outside the restricted profile fail both `helm lint --strict`
// and the install (`helm template` renders through the same), naming where it is.
func TestChartRejectsUnknownKeys(t *testing.T) {
	one := func(m map[string]any) []any { return []any{m} }
	for _, tc := range []struct {
		name string
		vals map[string]any
		want string
	}{
		{"a top-level key", map[string]any{"nodeSelecter": map[string]any{"pool": "push"}}, "nodeSelecter"},
		{"a nested key", map[string]any{"image": map[string]any{"tga": "v0.1.0"}}, "tga"},
		{"a key of the monitor", map[string]any{"podMonitor": map[string]any{"intervall": "30s"}}, "intervall"},
		{"a key in a volume", map[string]any{"extraVolumes": one(map[string]any{"name": "c", "secret": map[string]any{"secretNmae": "c"}})}, "secretNmae"},
		{"a key deep in the affinity", map[string]any{"affinity": map[string]any{"nodeAffinity": map[string]any{
			"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{"nodeSelectorTerms": one(map[string]any{"matchExpression": []any{}})}}}}, "matchExpression"},
		{"a key of a toleration", map[string]any{"tolerations": one(map[string]any{"key": "dedicated", "efect": "NoSchedule"})}, "efect"},
		{"a key of an env source", map[string]any{"extraEnv": one(map[string]any{"name": "X", "valueFrom": map[string]any{"secretKeyRef": map[string]any{"nme": "s", "key": "k"}}})}, "nme"},
		{"a key of a proxy peer", map[string]any{"proxy": map[string]any{"peers": one(map[string]any{"podSelecter": map[string]any{}})}}, "podSelecter"},
		{"a mount without its path", map[string]any{"extraVolumeMounts": one(map[string]any{"name": "c"})}, "mountPath"},
		{"a string for a number", map[string]any{"settings": map[string]any{"shards": "six"}}, "/settings/shards"},
		{"a number for a string", map[string]any{"priorityClassName": 7}, "/priorityClassName"},
		{"a setting that is no flag's variable", map[string]any{"settings": map[string]any{"extra": map[string]any{"PREFIX": "eu:"}}}, "PREFIX"},
		{"a pull policy", map[string]any{"image": map[string]any{"pullPolicy": "Sometimes"}}, "/image/pullPolicy"},
		{"root allowed", map[string]any{"podSecurityContext": map[string]any{"runAsNonRoot": false}}, "/podSecurityContext/runAsNonRoot"},
		{"user 0", map[string]any{"podSecurityContext": map[string]any{"runAsUser": 0}}, "/podSecurityContext/runAsUser"},
		{"no seccomp", map[string]any{"podSecurityContext": map[string]any{"seccompProfile": map[string]any{"type": "Unconfined"}}}, "/podSecurityContext/seccompProfile/type"},
		{"privilege escalation", map[string]any{"securityContext": map[string]any{"allowPrivilegeEscalation": true}}, "/securityContext/allowPrivilegeEscalation"},
		{"privileged", map[string]any{"securityContext": map[string]any{"privileged": true}}, "/securityContext/privileged"},
		{"a capability added", map[string]any{"securityContext": map[string]any{"capabilities": map[string]any{"add": []any{"NET_ADMIN"}}}}, "/securityContext/capabilities/add"},
		{"ALL not dropped", map[string]any{"securityContext": map[string]any{"capabilities": map[string]any{"drop": []any{"NET_RAW"}}}}, "/securityContext/capabilities/drop"},
		{"a field restricted has no say in", map[string]any{"securityContext": map[string]any{"procMount": "Unmasked"}}, "procMount"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := renderChartErr(chartRelease, "webpush-gateway", tc.vals)
			if err == nil || !strings.Contains(err.Error(), "schema") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("install gave %v, want the schema's error naming %q", err, tc.want)
			}
			if err := errors.Join(lintChart(t, tc.vals)...); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("helm lint --strict gave %v, want an error naming %q", err, tc.want)
			}
		})
	}
}

// TestChartSecurityWithinRestricted: security contexts changed within the restricted profile
// (another non-root user, a Localhost seccomp profile, NET_BIND_SERVICE added) are accepted and
// render a pod that Pod Security restricted admits.
func TestChartSecurityWithinRestricted(t *testing.T) {
	vals := map[string]any{
		"podSecurityContext": map[string]any{"runAsUser": 10001, "runAsGroup": 10001, "fsGroup": 10001, "fsGroupChangePolicy": "OnRootMismatch",
			"seccompProfile": map[string]any{"type": "Localhost", "localhostProfile": "profiles/gateway.json"}},
		"securityContext": map[string]any{"capabilities": map[string]any{"drop": []any{"ALL"}, "add": []any{"NET_BIND_SERVICE"}}},
	}
	r := renderChart(t, chartRelease, "webpush-gateway", vals)
	d, c := r.b.worker(t)
	sc := d.Spec.Template.Spec.SecurityContext
	if sc == nil || *sc.RunAsUser != 10001 || *sc.FSGroup != 10001 || sc.SeccompProfile.Type != corev1.SeccompProfileTypeLocalhost || !*sc.RunAsNonRoot {
		t.Errorf("pod security context %+v does not hold the values (with the defaults' runAsNonRoot)", sc)
	}
	if cs := c.SecurityContext; len(cs.Capabilities.Add) != 1 || !*cs.ReadOnlyRootFilesystem || *cs.AllowPrivilegeEscalation {
		t.Errorf("container security context %+v", cs)
	}
	if err := restricted(&d.Spec.Template.ObjectMeta, &d.Spec.Template.Spec); err != nil {
		t.Error(err)
	}
	for _, err := range lintChart(t, vals) {
		t.Error(err)
	}
}

// TestChartArtifactHubAnnotations: the annotations Artifact Hub lists the chart by parse as it
// reads them, name the image the chart deploys by default at the chart's appVersion with the
// release's platforms, and give the licence of LICENSE.
func TestChartArtifactHubAnnotations(t *testing.T) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	a := ch.Metadata.Annotations
	var images []struct {
		Name      string   `json:"name"`
		Image     string   `json:"image"`
		Platforms []string `json:"platforms"`
	}
	if err := yaml.UnmarshalStrict([]byte(a["artifacthub.io/images"]), &images); err != nil {
		t.Fatalf("artifacthub.io/images: %v", err)
	}
	repo := ch.Values["image"].(map[string]any)["repository"]
	if len(images) != 1 || images[0].Image != fmt.Sprintf("%s:%s", repo, ch.Metadata.AppVersion) || !slices.Equal(images[0].Platforms, release.Platforms) {
		t.Errorf("artifacthub.io/images %+v, want %s:%s for %v", images, repo, ch.Metadata.AppVersion, release.Platforms)
	}
	var links []struct{ Name, URL string }
	if err := yaml.UnmarshalStrict([]byte(a["artifacthub.io/links"]), &links); err != nil || len(links) == 0 {
		t.Errorf("artifacthub.io/links: %v %v", links, err)
	}
	for _, l := range links {
		doc, ok := strings.CutPrefix(l.URL, "https://github.com/webpush-gateway/webpush-gateway/blob/main/")
		if !ok {
			t.Errorf("link %s points outside the repository's files", l.URL)
		} else if _, err := os.Stat(filepath.Join("..", doc)); err != nil {
			t.Errorf("link %s: %v", l.URL, err)
		}
	}
	licence, err := os.ReadFile(filepath.Join("..", "LICENSE"))
	if err != nil {
		t.Fatal(err)
	}
	if a["artifacthub.io/license"] != "Apache-2.0" || !strings.Contains(string(licence), "Apache License") || !strings.Contains(string(licence), "Version 2.0") {
		t.Errorf("artifacthub.io/license %q against LICENSE", a["artifacthub.io/license"])
	}
	for _, k := range []string{"artifacthub.io/prerelease", "artifacthub.io/containsSecurityUpdates"} {
		if v := a[k]; v != "true" && v != "false" {
			t.Errorf("%s %q, want true or false", k, v)
		}
	}
}
