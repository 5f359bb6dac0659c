package deploy_test

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// proxyExample is the production overlay with the egress-proxy component.
const proxyExample = "overlays/production-egress-proxy"

// checkProxyPolicy: with the egress-proxy component the worker's egress is DNS, Redis and the
// proxy named by GATEWAY_PROXY, and nothing else: no public 443, no metadata address.
func checkProxyPolicy(np *networkingv1.NetworkPolicy, proxyURL string) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	u, err := url.Parse(proxyURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Port() == "" {
		return []error{fmt.Errorf("GATEWAY_PROXY %q is not an http(s)://host:port URL", proxyURL)}
	}
	port, _ := strconv.Atoi(u.Port())
	// The Service name's second label is its namespace (name.namespace.svc...).
	labels := strings.Split(u.Hostname(), ".")
	if len(labels) < 3 || labels[2] != "svc" {
		bad("GATEWAY_PROXY host %s is not a Service name (name.namespace.svc...)", u.Hostname())
		return errs
	}
	proxyNS := labels[1]
	for _, a := range []string{"142.250.74.10", "2a00:1450:4001:82a::200a", "169.254.169.254", "10.0.0.1"} {
		for _, p := range []int32{443, 80, int32(port)} {
			if egressAllows(np, netip.MustParseAddr(a), p, corev1.ProtocolTCP) {
				bad("egress to %s:%d is allowed; behind the proxy nothing goes to an address directly", a, p)
			}
		}
	}
	proxyRules := 0
	for i, rule := range np.Spec.Egress {
		if len(rule.Ports) == 0 || len(rule.To) == 0 {
			bad("egress rule %d has no ports or no peers: it allows everything on one side", i)
		}
		for _, peer := range rule.To {
			if peer.IPBlock != nil {
				bad("egress rule %d has an ipBlock: the proxy is reached by selector", i)
			}
		}
		for _, p := range rule.Ports {
			if p.Port == nil {
				bad("egress rule %d opens every port", i)
				continue
			}
			switch p.Port.IntVal {
			case 53, 6379, 26379:
			case int32(port):
				proxyRules++
				for _, peer := range rule.To {
					ns := ""
					if peer.NamespaceSelector != nil {
						ns = peer.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"]
					}
					if ns != proxyNS || peer.PodSelector == nil || len(peer.PodSelector.MatchLabels) == 0 {
						bad("egress rule %d to port %d reaches namespace %q pods %v, want the proxy's pods in %q", i, port, ns, peer.PodSelector, proxyNS)
					}
				}
			default:
				bad("egress rule %d opens port %s: only DNS, Redis and the proxy's %d", i, p.Port.String(), port)
			}
		}
	}
	if proxyRules != 1 {
		bad("%d egress rules reach the proxy's port %d, want 1", proxyRules, port)
	}
	return errs
}

func TestEgressProxyComponent(t *testing.T) {
	b := build(t, proxyExample)
	_, c := b.worker(t)
	proxy := env(t, b, c)["GATEWAY_PROXY"]
	if proxy == "" {
		t.Fatal("the worker has no GATEWAY_PROXY")
	}
	if len(b.netpols) != 1 {
		t.Fatalf("%d NetworkPolicies, want 1", len(b.netpols))
	}
	for _, err := range checkProxyPolicy(b.netpols[0], proxy) {
		t.Error(err)
	}
	// Everything else is the production overlay's: DNS and the Redis Cluster rule stay.
	prod := build(t, "overlays/production")
	if !slices.EqualFunc(b.netpols[0].Spec.Egress[:2], prod.netpols[0].Spec.Egress[:2], func(a, b networkingv1.NetworkPolicyEgressRule) bool {
		return a.String() == b.String()
	}) {
		t.Error("the component changed the DNS or Redis egress rules")
	}
	for _, err := range checkWorkerPod(t, b, b.deployments[0], c) {
		t.Error(err)
	}
	if host, port, err := net.SplitHostPort(strings.TrimPrefix(proxy, "http://")); err != nil || host == "" || port != "3128" {
		t.Errorf("GATEWAY_PROXY %q, want the component's http://host:3128", proxy)
	}
}

// TestEgressProxyChecksCatchBreakage: the public 443 rule left in, or the proxy rule opened to
// every namespace, is caught.
func TestEgressProxyChecksCatchBreakage(t *testing.T) {
	b := build(t, proxyExample)
	prod := build(t, "overlays/production")
	_, c := b.worker(t)
	proxy := env(t, b, c)["GATEWAY_PROXY"]
	for _, tc := range []struct {
		name   string
		mutate func(np *networkingv1.NetworkPolicy)
		want   string
	}{
		{"public 443 kept", func(np *networkingv1.NetworkPolicy) {
			np.Spec.Egress = append(np.Spec.Egress, prod.netpols[0].Spec.Egress[2])
		}, "142.250.74.10:443 is allowed"},
		{"proxy in any namespace", func(np *networkingv1.NetworkPolicy) {
			np.Spec.Egress[2].To[0].NamespaceSelector = &metav1.LabelSelector{}
		}, "want the proxy's pods"},
		{"another port", func(np *networkingv1.NetworkPolicy) {
			np.Spec.Egress[2].Ports = append(np.Spec.Egress[2].Ports, networkingv1.NetworkPolicyPort{Port: ptr(intstr.FromInt32(8080))})
		}, "opens port 8080"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			np := b.netpols[0].DeepCopy()
			tc.mutate(np)
			if err := errors.Join(checkProxyPolicy(np, proxy)...); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("checks gave %v, want an error mentioning %q", err, tc.want)
			}
		})
	}
}

// TestChartBehindAProxyIsTheProxyOverlay: the chart with proxy values renders what the
// production-egress-proxy overlay builds.
func TestChartBehindAProxyIsTheProxyOverlay(t *testing.T) {
	r := renderChart(t, chartRelease, "webpush-gateway", map[string]any{"proxy": map[string]any{
		"url": "http://egress-proxy.egress-proxy.svc.cluster.local:3128",
		"peers": []any{map[string]any{
			"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": "egress-proxy"}},
			"podSelector":       map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": "egress-proxy"}},
		}},
		"port": 3128,
	}})
	for _, err := range compareWithOverlay(t, build(t, proxyExample), r) {
		t.Error(err)
	}
	if _, err := renderChartErr(chartRelease, "webpush-gateway", map[string]any{"proxy": map[string]any{"url": "http://p.example:3128"}}); err == nil ||
		!strings.Contains(err.Error(), "proxy.peers") {
		t.Errorf("a proxy url without peers rendered (%v); want an error naming proxy.peers", err)
	}
}
