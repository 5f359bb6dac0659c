package deploy_test

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"

	"github.com/webpush-gateway/webpush-gateway/deploy/image"
	"github.com/webpush-gateway/webpush-gateway/providers"
	"github.com/webpush-gateway/webpush-gateway/stream"
)

// env resolves the container's environment as the kubelet does for the parts these manifests
// use: envFrom ConfigMaps of the overlay, then env (later wins), with values from fields,
// resources and secrets resolved where the overlay holds them, and $(VAR) expanded.
func env(t *testing.T, b *built, c *corev1.Container) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, src := range c.EnvFrom {
		if src.ConfigMapRef != nil {
			for k, v := range b.configMap(t, src.ConfigMapRef.Name).Data {
				out[src.Prefix+k] = v
			}
		}
	}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			out[e.Name] = expand(e.Value, out)
		case e.ValueFrom.FieldRef != nil:
			out[e.Name] = "<" + e.ValueFrom.FieldRef.FieldPath + ">"
		case e.ValueFrom.ResourceFieldRef != nil:
			out[e.Name] = resourceValue(t, c, e.ValueFrom.ResourceFieldRef)
		case e.ValueFrom.SecretKeyRef != nil:
			out[e.Name] = "<secret " + e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key + ">"
			for _, s := range b.secrets {
				if s.Name == e.ValueFrom.SecretKeyRef.Name || generatedName(s.Name) == e.ValueFrom.SecretKeyRef.Name {
					if v, ok := s.Data[e.ValueFrom.SecretKeyRef.Key]; ok {
						out[e.Name] = string(v)
					}
				}
			}
		}
	}
	return out
}

// expand does the kubelet's $(VAR) expansion against the variables defined before.
func expand(v string, vars map[string]string) string {
	var sb strings.Builder
	for {
		i := strings.Index(v, "$(")
		if i < 0 {
			sb.WriteString(v)
			return sb.String()
		}
		j := strings.IndexByte(v[i:], ')')
		if j < 0 {
			sb.WriteString(v)
			return sb.String()
		}
		name := v[i+2 : i+j]
		sb.WriteString(v[:i])
		if val, ok := vars[name]; ok {
			sb.WriteString(val)
		} else {
			sb.WriteString(v[i : i+j+1])
		}
		v = v[i+j+1:]
	}
}

// resourceValue is what the kubelet puts in a resourceFieldRef variable: the quantity divided
// by the divisor, rounded up.
func resourceValue(t *testing.T, c *corev1.Container, ref *corev1.ResourceFieldSelector) string {
	t.Helper()
	var q resource.Quantity
	switch ref.Resource {
	case "limits.memory":
		q = c.Resources.Limits[corev1.ResourceMemory]
	case "requests.memory":
		q = c.Resources.Requests[corev1.ResourceMemory]
	default:
		t.Fatalf("resourceFieldRef %s: not handled by the test", ref.Resource)
	}
	div := ref.Divisor
	if div.IsZero() {
		div = resource.MustParse("1")
	}
	return strconv.FormatInt(int64(math.Ceil(float64(q.Value())/float64(div.Value()))), 10)
}

// parseGoMemLimit reads GOMEMLIMIT as the Go runtime does: bytes, or a number with B, KiB,
// MiB, GiB or TiB.
func parseGoMemLimit(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}
	mult := int64(1)
	for _, u := range units {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = n, u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("GOMEMLIMIT %q is not a size the Go runtime reads", s)
	}
	return n * mult, nil
}

// registryOf parses the registry.yaml the overlay mounts, with the worker's own loader.
func registryOf(t *testing.T, b *built) *providers.Registry {
	t.Helper()
	data, ok := b.configMap(t, "gateway-registry").Data["registry.yaml"]
	if !ok {
		t.Fatalf("%s: ConfigMap gateway-registry has no registry.yaml", b.dir)
	}
	reg, err := providers.Parse(b.dir+"/registry.yaml", []byte(data))
	if err != nil {
		t.Fatalf("%s: the mounted registry.yaml does not load: %v", b.dir, err)
	}
	return reg
}

// checkWorkerPod checks the worker's pod template against what `run` needs: probes on the
// listener's paths and port, the grace period, GOMEMLIMIT, the consumer name, the registry
// and key mounts, and no token.
func checkWorkerPod(t *testing.T, b *built, d *appsv1.Deployment, c *corev1.Container) []error {
	t.Helper()
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	spec := d.Spec.Template.Spec
	e := env(t, b, c)

	// The listener: its port, named as the probes and the PodMonitor use it.
	var port *corev1.ContainerPort
	for i := range c.Ports {
		if c.Ports[i].Name == httpPortName {
			port = &c.Ports[i]
		}
	}
	if port == nil || port.ContainerPort != httpPort {
		bad("container port %q must be %d (run --http's): %+v", httpPortName, httpPort, c.Ports)
	}
	if _, p, err := net.SplitHostPort(e["GATEWAY_HTTP"]); err != nil || p != strconv.Itoa(int(httpPort)) {
		bad("GATEWAY_HTTP %q must listen on port %d", e["GATEWAY_HTTP"], httpPort)
	}
	probe := func(name string, p *corev1.Probe, wantPath string) {
		if p == nil || p.HTTPGet == nil {
			bad("%s probe missing (want GET %s)", name, wantPath)
			return
		}
		if p.HTTPGet.Path != wantPath {
			bad("%s probe path %q, want %q", name, p.HTTPGet.Path, wantPath)
		}
		if pt := p.HTTPGet.Port; !(pt.Type == intstr.String && pt.StrVal == httpPortName) && !(pt.Type == intstr.Int && pt.IntVal == httpPort) {
			bad("%s probe port %s, want %q or %d", name, pt.String(), httpPortName, httpPort)
		}
	}
	probe("startup", c.StartupProbe, livezPath)
	probe("liveness", c.LivenessProbe, livezPath)
	probe("readiness", c.ReadinessProbe, readyzPath)

	// Grace: longer than --grace plus the longest provider timeout.
	grace := defaultGrace
	if g, ok := e["GATEWAY_GRACE"]; ok {
		var err error
		if grace, err = time.ParseDuration(g); err != nil {
			bad("GATEWAY_GRACE %q: %v", g, err)
		}
	}
	var longest time.Duration
	for _, p := range registryOf(t, b).Providers() {
		longest = max(longest, p.Timeout)
	}
	if tg := spec.TerminationGracePeriodSeconds; tg == nil || time.Duration(*tg)*time.Second <= grace+longest {
		bad("terminationGracePeriodSeconds %v must exceed --grace %v + the longest provider timeout %v", derefInt64(tg), grace, longest)
	}

	// GOMEMLIMIT: from the memory limit, a few per cent under it.
	limit := c.Resources.Limits[corev1.ResourceMemory]
	if limit.IsZero() {
		bad("no memory limit")
	} else if gml, err := parseGoMemLimit(e["GOMEMLIMIT"]); err != nil {
		bad("%v", err)
	} else if ratio := float64(gml) / float64(limit.Value()); ratio < 0.90 || ratio > 0.97 {
		bad("GOMEMLIMIT %d is %.1f %% of the memory limit %s, want 90–97 %%", gml, 100*ratio, limit.String())
	}

	if e["POD_NAME"] != "<metadata.name>" {
		bad("POD_NAME must come from the downward API's metadata.name, got %q", e["POD_NAME"])
	}
	if d.Spec.Replicas != nil {
		bad("Deployment sets replicas (%d): KEDA owns the count", *d.Spec.Replicas)
	}

	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
	}
	// registry.yaml: the ConfigMap mounted as a directory (hot reload sees the ..data swap).
	reg := e["GATEWAY_REGISTRY"]
	found := false
	for name, m := range mounts {
		v := volumes[name]
		if v.ConfigMap == nil || generatedName(v.ConfigMap.Name) != b.prefix+"gateway-registry" {
			continue
		}
		found = true
		if m.SubPath != "" || m.SubPathExpr != "" {
			bad("registry ConfigMap mounted with subPath: updates never reach it")
		}
		if path.Dir(reg) != m.MountPath || !m.ReadOnly {
			bad("GATEWAY_REGISTRY %q is not registry.yaml in the read-only ConfigMap mount %s", reg, m.MountPath)
		}
	}
	if !found {
		bad("ConfigMap gateway-registry is not mounted")
	}
	// VAPID keys: files of the secret, mode 0400, every --vapid-key path inside the mount.
	var keyMount string
	for name, m := range mounts {
		if v := volumes[name]; v.Secret != nil && generatedName(v.Secret.SecretName) == "gateway-vapid" {
			keyMount = m.MountPath
			if v.Secret.DefaultMode == nil || *v.Secret.DefaultMode != 0o400 {
				bad("gateway-vapid volume mode %o, want 0400", derefInt32(v.Secret.DefaultMode))
			}
			if m.SubPath != "" || !m.ReadOnly {
				bad("gateway-vapid must be mounted read-only as a directory")
			}
		}
	}
	if keyMount == "" {
		bad("Secret gateway-vapid is not mounted")
	}
	keys := strings.Split(e["GATEWAY_VAPID_KEY"], ",")
	if len(keys) == 0 || keys[0] == "" {
		bad("GATEWAY_VAPID_KEY is not set")
	}
	for _, k := range keys {
		_, file, _ := strings.Cut(k, "=")
		if !strings.Contains(k, "=") {
			file = k
		}
		if path.Dir(file) != keyMount {
			bad("VAPID key %q is not a file of the gateway-vapid mount %s", file, keyMount)
		}
	}
	if sc := spec.SecurityContext; sc == nil || sc.FSGroup == nil {
		bad("no fsGroup: a 0400 secret file belongs to root and the non-root worker cannot read it")
	} else if sc.RunAsUser == nil || *sc.RunAsUser != image.UID || sc.RunAsGroup == nil || *sc.RunAsGroup != image.GID || *sc.FSGroup != image.GID {
		bad("pod runs as %v:%v with fsGroup %v, want the image's user %d:%d", derefInt64(sc.RunAsUser), derefInt64(sc.RunAsGroup), *sc.FSGroup, image.UID, image.GID)
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		bad("pod mounts a service account token; the worker calls no Kubernetes API")
	}
	if spec.EnableServiceLinks == nil || *spec.EnableServiceLinks {
		bad("service links on: a Service named gateway would set GATEWAY_* variables the worker reads as flags")
	}
	if c.SecurityContext == nil || c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
		bad("root file system is writable")
	}
	zones := false
	for _, tsc := range spec.TopologySpreadConstraints {
		if tsc.TopologyKey == "topology.kubernetes.io/zone" {
			zones = true
			if sel, err := metav1.LabelSelectorAsSelector(tsc.LabelSelector); err != nil || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
				bad("zone spread constraint does not select the worker's pods")
			}
		}
	}
	if !zones {
		bad("no topology spread across zones")
	}
	return errs
}

func derefInt64(p *int64) any {
	if p == nil {
		return "unset"
	}
	return *p
}

func derefInt32(p *int32) any {
	if p == nil {
		return "unset"
	}
	return *p
}

// restricted evaluates a pod template with the Pod Security admission's own checks at the
// "restricted" level, latest version: what a namespace labelled enforce=restricted admits.
func restricted(meta *metav1.ObjectMeta, spec *corev1.PodSpec) error {
	ev, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		return err
	}
	res := policy.AggregateCheckResults(ev.EvaluatePod(psaapi.LevelVersion{Level: psaapi.LevelRestricted, Version: psaapi.LatestVersion()}, meta, spec))
	if !res.Allowed {
		return fmt.Errorf("Pod Security restricted refuses it: %s: %s", res.ForbiddenReason(), res.ForbiddenDetail())
	}
	return nil
}

// TestWorkerPod checks the worker's pod in every overlay (see checkWorkerPod), and that it and
// every other pod template pass Pod Security "restricted".
func TestWorkerPod(t *testing.T) {
	for _, dir := range overlays {
		t.Run(dir, func(t *testing.T) {
			b := build(t, dir)
			d, c := b.worker(t)
			for _, err := range checkWorkerPod(t, b, d, c) {
				t.Error(err)
			}
			for _, dep := range b.deployments {
				if err := restricted(&dep.Spec.Template.ObjectMeta, &dep.Spec.Template.Spec); err != nil {
					t.Errorf("Deployment %s: %v", dep.Name, err)
				}
			}
			enforced := false
			for _, ns := range b.namespaces {
				enforced = enforced || ns.Labels["pod-security.kubernetes.io/enforce"] == "restricted"
			}
			if !enforced {
				t.Error("the overlay's Namespace does not enforce Pod Security restricted")
			}
		})
	}
}

// TestWorkerPodChecksCatchBreakage breaks the built Deployment one way at a time and expects
// the checks above to say so: a removed probe, a probe on the wrong path, a privileged
// container, a grace period that cuts sends off, GOMEMLIMIT at the limit, a subPath mount.
func TestWorkerPodChecksCatchBreakage(t *testing.T) {
	b := build(t, "overlays/production")
	cases := []struct {
		name   string
		mutate func(d *appsv1.Deployment, c *corev1.Container)
		want   string
	}{
		{"readiness probe removed", func(_ *appsv1.Deployment, c *corev1.Container) { c.ReadinessProbe = nil }, "readiness probe missing"},
		{"liveness probe on readyz", func(_ *appsv1.Deployment, c *corev1.Container) { c.LivenessProbe.HTTPGet.Path = readyzPath }, "liveness probe path"},
		{"probe on another port", func(_ *appsv1.Deployment, c *corev1.Container) { c.StartupProbe.HTTPGet.Port = intstr.FromInt32(8080) }, "startup probe port"},
		{"grace too short", func(d *appsv1.Deployment, _ *corev1.Container) {
			d.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr(int64(30))
		}, "terminationGracePeriodSeconds"},
		{"GOMEMLIMIT at the limit", func(_ *appsv1.Deployment, c *corev1.Container) {
			for i := range c.Env {
				if c.Env[i].Name == "GOMEMLIMIT" {
					c.Env[i].Value = "$(MEMORY_LIMIT_MIB)MiB"
				}
			}
		}, "GOMEMLIMIT"},
		{"registry by subPath", func(_ *appsv1.Deployment, c *corev1.Container) {
			for i := range c.VolumeMounts {
				if c.VolumeMounts[i].Name == "registry" {
					c.VolumeMounts[i].SubPath = "registry.yaml"
				}
			}
		}, "subPath"},
		{"replicas set", func(d *appsv1.Deployment, _ *corev1.Container) { d.Spec.Replicas = ptr(int32(3)) }, "KEDA owns"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d0, _ := b.worker(t)
			d := d0.DeepCopy()
			c := &d.Spec.Template.Spec.Containers[0]
			tc.mutate(d, c)
			if err := errors.Join(checkWorkerPod(t, b, d, c)...); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("checks gave %v, want an error mentioning %q", err, tc.want)
			}
		})
	}
	t.Run("privileged container", func(t *testing.T) {
		d0, _ := b.worker(t)
		d := d0.DeepCopy()
		d.Spec.Template.Spec.Containers[0].SecurityContext.Privileged = ptr(true)
		if err := restricted(&d.Spec.Template.ObjectMeta, &d.Spec.Template.Spec); err == nil || !strings.Contains(err.Error(), "privileged") {
			t.Fatalf("restricted() = %v, want a refusal naming privileged", err)
		}
	})
	t.Run("capabilities kept", func(t *testing.T) {
		d0, _ := b.worker(t)
		d := d0.DeepCopy()
		d.Spec.Template.Spec.Containers[0].SecurityContext.Capabilities = nil
		if err := restricted(&d.Spec.Template.ObjectMeta, &d.Spec.Template.Spec); err == nil {
			t.Fatal("restricted() accepted a container that keeps its capabilities")
		}
	})
}

func ptr[T any](v T) *T { return &v }

// TestSelectorsAndAccount: every selector picks the worker's pods, the PodMonitor scrapes the
// listener's metrics path, the PDB lets unhealthy pods go, and the service account has no token.
func TestSelectorsAndAccount(t *testing.T) {
	for _, dir := range overlays {
		t.Run(dir, func(t *testing.T) {
			b := build(t, dir)
			d, _ := b.worker(t)
			pods := labels.Set(d.Spec.Template.Labels)
			matches := func(what string, sel *metav1.LabelSelector) {
				s, err := metav1.LabelSelectorAsSelector(sel)
				if err != nil || s.Empty() || !s.Matches(pods) {
					t.Errorf("%s selector %v does not select the worker's pods %v", what, sel, pods)
				}
			}
			matches("Deployment", d.Spec.Selector)
			if len(b.pdbs) != 1 || len(b.podMonitors) != 1 || len(b.netpols) != 1 || len(b.serviceAccounts) != 1 {
				t.Fatalf("want one each of PDB, PodMonitor, NetworkPolicy, ServiceAccount: %d %d %d %d",
					len(b.pdbs), len(b.podMonitors), len(b.netpols), len(b.serviceAccounts))
			}
			pdb := b.pdbs[0]
			matches("PodDisruptionBudget", pdb.Spec.Selector)
			if pdb.Spec.UnhealthyPodEvictionPolicy == nil || *pdb.Spec.UnhealthyPodEvictionPolicy != "AlwaysAllow" {
				t.Errorf("PDB unhealthyPodEvictionPolicy %v, want AlwaysAllow", pdb.Spec.UnhealthyPodEvictionPolicy)
			}
			pm := b.podMonitors[0]
			matches("PodMonitor", &pm.Spec.Selector)
			if len(pm.Spec.PodMetricsEndpoints) != 1 {
				t.Fatalf("PodMonitor endpoints %d, want 1", len(pm.Spec.PodMetricsEndpoints))
			}
			ep := pm.Spec.PodMetricsEndpoints[0]
			if ep.Port == nil || *ep.Port != httpPortName || ep.Path != metricsPath {
				t.Errorf("PodMonitor scrapes port %v path %q, want %q %q", ep.Port, ep.Path, httpPortName, metricsPath)
			}
			matches("NetworkPolicy", &b.netpols[0].Spec.PodSelector)
			sa := b.serviceAccounts[0]
			if sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken || d.Spec.Template.Spec.ServiceAccountName != sa.Name {
				t.Errorf("ServiceAccount %s: automount %v, pod uses %q", sa.Name, sa.AutomountServiceAccountToken, d.Spec.Template.Spec.ServiceAccountName)
			}
		})
	}
}

// egressAllows says whether the policy lets a pod it selects open proto/port to addr, an
// address outside the cluster (only ipBlock peers can match one).
func egressAllows(np *networkingv1.NetworkPolicy, addr netip.Addr, port int32, proto corev1.Protocol) bool {
	for _, rule := range np.Spec.Egress {
		portOK := len(rule.Ports) == 0
		for _, p := range rule.Ports {
			pr := corev1.ProtocolTCP
			if p.Protocol != nil {
				pr = *p.Protocol
			}
			if pr == proto && (p.Port == nil || (p.Port.Type == intstr.Int && p.Port.IntVal == port)) {
				portOK = true
			}
		}
		if !portOK {
			continue
		}
		if len(rule.To) == 0 {
			return true
		}
		for _, peer := range rule.To {
			if peer.IPBlock == nil {
				continue
			}
			if cidr, err := netip.ParsePrefix(peer.IPBlock.CIDR); err != nil || !cidr.Contains(addr) {
				continue
			}
			excluded := false
			for _, ex := range peer.IPBlock.Except {
				if p, err := netip.ParsePrefix(ex); err == nil && p.Contains(addr) {
					excluded = true
				}
			}
			if !excluded {
				return true
			}
		}
	}
	return false
}

// checkNetworkPolicy: egress only to DNS, Redis and public TCP 443; ingress only to the
// metrics port.
func checkNetworkPolicy(np *networkingv1.NetworkPolicy) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) || !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
		bad("policyTypes %v, want Ingress and Egress", np.Spec.PolicyTypes)
	}
	refused := []string{
		"169.254.169.254", "169.254.170.2", "10.0.0.1", "172.16.5.4", "192.168.1.1", "100.64.0.1", "100.100.100.200",
		"127.0.0.1", "0.0.0.0", "fd00:ec2::254", "fe80::1", "::1", "::ffff:10.0.0.1", "64:ff9b::a00:1",
	}
	for _, a := range refused {
		if egressAllows(np, netip.MustParseAddr(a), 443, corev1.ProtocolTCP) {
			bad("egress to %s:443 is allowed; private, CGNAT, link-local and metadata addresses must be refused", a)
		}
	}
	for _, a := range []string{"142.250.74.10", "2a00:1450:4001:82a::200a"} {
		if !egressAllows(np, netip.MustParseAddr(a), 443, corev1.ProtocolTCP) {
			bad("egress to the public %s:443 is refused; push services live there", a)
		}
		for _, other := range []struct {
			port  int32
			proto corev1.Protocol
		}{{80, corev1.ProtocolTCP}, {443, corev1.ProtocolUDP}, {22, corev1.ProtocolTCP}, {6379, corev1.ProtocolTCP}} {
			if egressAllows(np, netip.MustParseAddr(a), other.port, other.proto) {
				bad("egress to the public %s:%d/%s is allowed; only TCP 443 is", a, other.port, other.proto)
			}
		}
	}
	for i, rule := range np.Spec.Egress {
		if len(rule.Ports) == 0 || len(rule.To) == 0 {
			bad("egress rule %d has no ports or no peers: it allows everything on one side", i)
		}
		for _, p := range rule.Ports {
			if p.Port == nil {
				continue
			}
			switch p.Port.IntVal {
			case 53, 6379, 26379, 443:
			default:
				bad("egress rule %d opens port %s: only DNS, Redis and 443", i, p.Port.String())
			}
			if p.Port.IntVal != 443 {
				for _, peer := range rule.To {
					if peer.IPBlock != nil {
						bad("egress rule %d opens port %s to an ipBlock: DNS and Redis go to pods by selector", i, p.Port.String())
					}
				}
			}
		}
	}
	if len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].Ports) != 1 ||
		np.Spec.Ingress[0].Ports[0].Port == nil || np.Spec.Ingress[0].Ports[0].Port.String() != httpPortName || len(np.Spec.Ingress[0].From) == 0 {
		bad("ingress must be one rule, from Prometheus, to port %q only: %+v", httpPortName, np.Spec.Ingress)
	}
	return errs
}

// TestNetworkPolicy checks every overlay's policy (see checkNetworkPolicy) and that its Redis
// rule reaches the Redis the worker is configured for where the overlay holds both.
func TestNetworkPolicy(t *testing.T) {
	for _, dir := range overlays {
		t.Run(dir, func(t *testing.T) {
			b := build(t, dir)
			for _, err := range checkNetworkPolicy(b.netpols[0]) {
				t.Error(err)
			}
			_, c := b.worker(t)
			u, err := url.Parse(env(t, b, c)["GATEWAY_REDIS"])
			if err != nil || u.Host == "" {
				return // a Secret created out of band: nothing to compare
			}
			for _, svc := range b.services {
				if svc.Name != u.Hostname() {
					continue
				}
				sel := labels.SelectorFromSet(svc.Spec.Selector)
				allowed := false
				for _, rule := range b.netpols[0].Spec.Egress {
					for _, peer := range rule.To {
						if peer.PodSelector != nil && peer.NamespaceSelector == nil {
							if s, err := metav1.LabelSelectorAsSelector(peer.PodSelector); err == nil && s.String() == sel.String() {
								for _, p := range rule.Ports {
									allowed = allowed || p.Port.String() == u.Port()
								}
							}
						}
					}
				}
				if !allowed {
					t.Errorf("GATEWAY_REDIS %s: no egress rule reaches Service %s's pods on %s", u.Redacted(), svc.Name, u.Port())
				}
			}
		})
	}
}

// TestNetworkPolicyChecksCatchBreakage: opening the metadata address, port 80 or another
// ingress port is caught.
func TestNetworkPolicyChecksCatchBreakage(t *testing.T) {
	b := build(t, "overlays/production")
	for _, tc := range []struct {
		name   string
		mutate func(np *networkingv1.NetworkPolicy)
		want   string
	}{
		{"link-local not excepted", func(np *networkingv1.NetworkPolicy) {
			for i := range np.Spec.Egress[2].To {
				if ib := np.Spec.Egress[2].To[i].IPBlock; ib != nil {
					ib.Except = slices.DeleteFunc(ib.Except, func(s string) bool { return s == "169.254.0.0/16" })
				}
			}
		}, "169.254.169.254"},
		{"port 80 opened", func(np *networkingv1.NetworkPolicy) {
			np.Spec.Egress[2].Ports = append(np.Spec.Egress[2].Ports, networkingv1.NetworkPolicyPort{Port: ptr(intstr.FromInt32(80))})
		}, "80/TCP is allowed"},
		{"ingress from anywhere to anything", func(np *networkingv1.NetworkPolicy) {
			np.Spec.Ingress = append(np.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{})
		}, "ingress"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			np := b.netpols[0].DeepCopy()
			tc.mutate(np)
			if err := errors.Join(checkNetworkPolicy(np)...); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("checks gave %v, want an error mentioning %q", err, tc.want)
			}
		})
	}
}

// redisStreamTriggers checks per-stream triggers: exactly the worker's intake and lane streams
// (stream.KeysFor, one lane per provider of the mounted registry) for every shard, read with
// the worker's consumer group, at an address the overlay serves.
func redisStreamTriggers(t *testing.T, b *built, so *scaledObject, shards int, prefix string, ids []string) []error {
	t.Helper()
	var errs []error
	want := map[string]bool{}
	for s := range shards {
		k := stream.KeysFor(prefix, s)
		want[k.Intake], want[k.BulkIntake] = true, true
		for _, id := range ids {
			want[k.Lane(id)] = true
		}
	}
	got := map[string]bool{}
	for _, tr := range so.Spec.Triggers {
		if tr.Type != "redis-streams" {
			continue
		}
		name := tr.Metadata["stream"]
		if got[name] {
			errs = append(errs, fmt.Errorf("stream %s has two triggers", name))
		}
		got[name] = true
		if !want[name] {
			errs = append(errs, fmt.Errorf("trigger %q reads stream %q, which the worker does not use", tr.Name, name))
		}
		if tr.Metadata["consumerGroup"] != stream.Group {
			errs = append(errs, fmt.Errorf("trigger %q: consumerGroup %q, want %q", tr.Name, tr.Metadata["consumerGroup"], stream.Group))
		}
		host, port, err := net.SplitHostPort(tr.Metadata["address"])
		svcName, ns, _ := strings.Cut(host, ".")
		if err != nil || ns != so.Namespace+".svc" {
			errs = append(errs, fmt.Errorf("trigger %q: address %q is not a Service of namespace %s", tr.Name, tr.Metadata["address"], so.Namespace))
			continue
		}
		served := false
		for _, svc := range b.services {
			for _, p := range svc.Spec.Ports {
				served = served || (svc.Name == svcName && strconv.Itoa(int(p.Port)) == port)
			}
		}
		if !served {
			errs = append(errs, fmt.Errorf("trigger %q: no Service %s with port %s in the overlay", tr.Name, svcName, port))
		}
	}
	for name := range want {
		if !got[name] {
			errs = append(errs, fmt.Errorf("stream %s has no trigger", name))
		}
	}
	return errs
}

// TestScaledObject: KEDA scales the worker Deployment between sane bounds with a fallback, its
// triggers carry only metadata KEDA reads, and they scale on the worker's own streams: the
// intake and every lane of the mounted registry, never the delayed set, ledger, gone or dead
// stream. A provider added to registry.yaml without its lane in the scaler fails here.
func TestScaledObject(t *testing.T) {
	for _, dir := range overlays {
		t.Run(dir, func(t *testing.T) {
			b := build(t, dir)
			if len(b.scaledObjects) != 1 {
				t.Fatalf("%d ScaledObjects, want 1", len(b.scaledObjects))
			}
			so := b.scaledObjects[0]
			d, c := b.worker(t)
			if ref := so.Spec.ScaleTargetRef; ref == nil || ref.Name != d.Name || (ref.Kind != "" && ref.Kind != "Deployment") {
				t.Errorf("scaleTargetRef %+v, want Deployment %s", ref, d.Name)
			}
			lo, hi := derefInt32(so.Spec.MinReplicaCount), derefInt32(so.Spec.MaxReplicaCount)
			if so.Spec.MinReplicaCount == nil || *so.Spec.MinReplicaCount < 1 || so.Spec.MaxReplicaCount == nil || *so.Spec.MaxReplicaCount < *so.Spec.MinReplicaCount {
				t.Errorf("replicas %v..%v: want at least 1 and max >= min (the worker never scales to zero: it heartbeats and reclaims)", lo, hi)
			}
			if fb := so.Spec.Fallback; fb == nil || fb.FailureThreshold < 1 || fb.Replicas < *so.Spec.MinReplicaCount || fb.Replicas > *so.Spec.MaxReplicaCount {
				t.Errorf("fallback %+v: want replicas within %v..%v", fb, lo, hi)
			}
			for _, tr := range so.Spec.Triggers {
				for _, err := range checkTrigger(tr) {
					t.Error(err)
				}
			}
			e := env(t, b, c)
			shards, err := strconv.Atoi(e["GATEWAY_SHARDS"])
			if err != nil || shards < 1 {
				t.Fatalf("GATEWAY_SHARDS %q", e["GATEWAY_SHARDS"])
			}
			prefix := e["GATEWAY_PREFIX"]
			ids := registryOf(t, b).IDs()
			var kinds []string
			for _, tr := range so.Spec.Triggers {
				kinds = append(kinds, tr.Type)
			}
			switch {
			case slices.Contains(kinds, "redis-streams"):
				for _, err := range redisStreamTriggers(t, b, so, shards, prefix, ids) {
					t.Error(err)
				}
			case slices.Contains(kinds, "prometheus"):
				for _, tr := range so.Spec.Triggers {
					if tr.Type == "prometheus" {
						for _, err := range checkPrometheusTrigger(b, so, tr, ids) {
							t.Error(err)
						}
					}
				}
			default:
				t.Errorf("triggers %v scale on no queue", kinds)
			}
		})
	}
}

// TestScaledObjectChecksCatchBreakage: a lane trigger missing, a stream misspelt, and a
// Prometheus query that scales on the ledger are each caught.
func TestScaledObjectChecksCatchBreakage(t *testing.T) {
	dev := build(t, "overlays/dev")
	ids := registryOf(t, dev).IDs()
	so := *dev.scaledObjects[0]
	so.Spec.Triggers = slices.Clone(so.Spec.Triggers)
	so.Spec.Triggers = slices.DeleteFunc(so.Spec.Triggers, func(tr scaleTrigger) bool { return tr.Metadata["stream"] == "wp:{0}:lane:apple" })
	if err := errors.Join(redisStreamTriggers(t, dev, &so, 1, "", ids)...); err == nil || !strings.Contains(err.Error(), "wp:{0}:lane:apple has no trigger") {
		t.Errorf("lane trigger removed: %v", err)
	}
	so.Spec.Triggers = append(so.Spec.Triggers, scaleTrigger{Type: "redis-streams", Name: "typo", Metadata: map[string]string{
		"stream": "wp:0:lane:apple", "consumerGroup": "gateway", "address": "redis." + so.Namespace + ".svc:6379", "lagCount": "1"}})
	if err := errors.Join(redisStreamTriggers(t, dev, &so, 1, "", ids)...); err == nil || !strings.Contains(err.Error(), `"wp:0:lane:apple", which the worker does not use`) {
		t.Errorf("misspelt stream: %v", err)
	}

	prod := build(t, "overlays/production")
	rules := prod.rules[0].DeepCopy()
	for gi := range rules.Spec.Groups {
		for ri := range rules.Spec.Groups[gi].Rules {
			r := &rules.Spec.Groups[gi].Rules[ri]
			if r.Record == scalingRule {
				r.Expr = intstr.FromString(strings.ReplaceAll(r.Expr.String(), `stream=~"lane:.+"`, `stream=~"lane:.+|results"`))
			}
		}
	}
	broken := *prod
	broken.rules = []*monitoringRule{rules}
	so2 := prod.scaledObjects[0]
	if err := errors.Join(checkPrometheusTrigger(&broken, so2, so2.Spec.Triggers[0], ids)...); err == nil || !strings.Contains(err.Error(), "results") {
		t.Errorf("scaling on the ledger: %v", err)
	}
}
