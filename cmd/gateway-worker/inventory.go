package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/webpush-gateway/webpush-gateway/internal/product/cli"
	"github.com/webpush-gateway/webpush-gateway/providers"
)

// Bounds of the inventory report. An export is the operator's file, but its hosts are what
// browsers and clients supplied: keep memory and output bounded whatever it holds.
const (
	inventoryMaxLine      = 1 << 20 // a longer line is reported unreadable, not buffered
	inventoryMaxHosts     = 1 << 16 // distinct unknown hosts counted one by one; the rest only in "others"
	inventoryShownProblem = 20      // unreadable lines listed one by one
)

func cmdInventory(_ context.Context, fs *cli.FlagSet, args []string, stdout, stderr io.Writer) int {
	fs.Group("Delivery")
	registry := fs.String("registry", "", "provider table `FILE` that routes the endpoints (default: the registry.yaml built into this binary)")
	fs.Group("Report")
	total := fs.Count("total", 0, "in-flight total per replica to share (default: the registry's budget.total_in_flight, else the sum of max_in_flight)")
	top := fs.Count("top", 20, "unknown hosts listed one by one; the rest are summed as others")
	if code, ok := fs.Parse(args); !ok {
		return code
	}
	reg, err := cli.LoadRegistry(*registry)
	if err != nil {
		fmt.Fprintln(stderr, err) // file:line: field: problem, as check prints them
		return cli.ExitNo
	}
	regName := *registry
	if regName == "" {
		regName = cli.BuiltinRegistryName
	}
	in, name, err := openInput(fs.Arg(0))
	if err != nil {
		fmt.Fprintln(stderr, "gateway-worker inventory:", err)
		return 2
	}
	defer in.Close()
	inv := newInventory(reg)
	if err := inv.read(in); err != nil {
		fmt.Fprintf(stderr, "gateway-worker inventory: %s: %v\n", name, err)
		return 2
	}
	inv.print(stdout, name, regName, *total, *top)
	return 0
}

// inventory counts the subscriptions of an export by provider and unknown host.
type inventory struct {
	reg        *providers.Registry
	routed     int            // lines routed to a provider
	byProvider map[string]int // provider id -> subscriptions
	byHost     map[string]int // unknown authority -> subscriptions, at most inventoryMaxHosts keys
	untracked  int            // unknown-host subscriptions past inventoryMaxHosts distinct hosts
	bad        []badLine      // the first inventoryShownProblem unreadable lines
	badCount   int
}

type badLine struct {
	line   int
	reason string
}

func newInventory(reg *providers.Registry) *inventory {
	return &inventory{reg: reg, byProvider: map[string]int{}, byHost: map[string]int{}}
}

// read counts every line of in. Only an I/O error stops it; a line that cannot be read is
// recorded with its number and reading goes on.
func (inv *inventory) read(in io.Reader) error {
	r := bufio.NewReaderSize(in, 64<<10)
	for n := 1; ; n++ {
		line, tooLong, err := readLine(r)
		if err == io.EOF && line == nil && !tooLong {
			return nil
		}
		if err != nil && err != io.EOF {
			return fmt.Errorf("line %d: %w", n, err)
		}
		if tooLong {
			inv.problem(n, fmt.Sprintf("longer than %d bytes", inventoryMaxLine))
		} else {
			inv.line(n, line)
		}
		if err == io.EOF {
			return nil
		}
	}
}

// readLine returns the next line without its end of line; tooLong when it exceeded
// inventoryMaxLine (the rest of it is skipped). err is io.EOF after the last line.
func readLine(r *bufio.Reader) (line []byte, tooLong bool, err error) {
	for {
		chunk, err := r.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) > inventoryMaxLine+2 { // +2: the \r\n that is not content
				tooLong, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF && len(line) == 0 && !tooLong:
			return nil, false, io.EOF
		}
		return bytes.TrimRight(line, "\r\n"), tooLong, err
	}
}

func (inv *inventory) problem(n int, reason string) {
	inv.badCount++
	if len(inv.bad) < inventoryShownProblem {
		inv.bad = append(inv.bad, badLine{n, reason})
	}
}

// line routes one line. The reasons recorded name what is wrong, never the line's content:
// an endpoint's path is a credential.
func (inv *inventory) line(n int, raw []byte) {
	b := bytes.TrimSpace(raw)
	if len(b) == 0 {
		return
	}
	endpoint, reason := endpointOf(b)
	if reason != "" {
		inv.problem(n, reason)
		return
	}
	rt, err := inv.reg.Resolve(endpoint)
	switch {
	case errors.Is(err, providers.ErrNotHTTPS):
		inv.problem(n, "not https (Web Push endpoints are https only)")
		return
	case err != nil:
		// Resolve's texts never contain the endpoint.
		inv.problem(n, strings.TrimPrefix(err.Error(), "providers: "))
		return
	}
	inv.routed++
	inv.byProvider[rt.Provider.ID]++
	if rt.Unknown {
		if _, ok := inv.byHost[rt.Authority]; ok || len(inv.byHost) < inventoryMaxHosts {
			inv.byHost[rt.Authority]++
		} else {
			inv.untracked++
		}
	}
}

// endpointOf finds the endpoint in one line of an export, deciding the form by the line's
// first byte: '{' a JSON object (a PushSubscription or {"endpoint": ...}, or a job whose
// "subscription" is one), '"' a JSON string, anything else the endpoint itself.
func endpointOf(b []byte) (endpoint, reason string) {
	switch b[0] {
	case '"':
		if json.Unmarshal(b, &endpoint) != nil {
			return "", "not a valid JSON string"
		}
		return endpoint, ""
	case '{':
	default:
		return string(b), ""
	}
	var obj struct {
		Endpoint     json.RawMessage `json:"endpoint"`
		Subscription json.RawMessage `json:"subscription"`
	}
	if json.Unmarshal(b, &obj) != nil {
		return "", "not a valid JSON object"
	}
	field := "endpoint"
	raw := obj.Endpoint
	if raw == nil && obj.Subscription != nil {
		var sub struct {
			Endpoint json.RawMessage `json:"endpoint"`
		}
		if json.Unmarshal(obj.Subscription, &sub) != nil || sub.Endpoint == nil {
			return "", `"subscription" is not an object with an "endpoint"`
		}
		field, raw = "subscription.endpoint", sub.Endpoint
	}
	if raw == nil {
		return "", `no "endpoint" (want a PushSubscription, a job with "subscription", or {"endpoint": ...})`
	}
	if json.Unmarshal(raw, &endpoint) != nil {
		return "", field + " is not a string"
	}
	return endpoint, ""
}

// print writes the report. total > 0 overrides the budget to share.
func (inv *inventory) print(w io.Writer, name, registry string, total, top int) {
	fmt.Fprintf(w, "inventory of %s (routed by %s)\n", name, registry)
	fmt.Fprintf(w, "%d subscriptions read, %d lines could not be read\n\n", inv.routed, inv.badCount)

	list := inv.reg.Providers()
	fmt.Fprintf(w, "%-12s %13s %7s\n", "provider", "subscriptions", "share")
	for _, p := range list {
		fmt.Fprintf(w, "%-12s %13d %6.1f%%\n", p.ID, inv.byProvider[p.ID], percent(inv.byProvider[p.ID], inv.routed))
	}

	inv.printHosts(w, top)
	inv.printBudget(w, registry, total)

	if inv.badCount > 0 {
		fmt.Fprintf(w, "\nlines that could not be read: %d\n", inv.badCount)
		for _, b := range inv.bad {
			fmt.Fprintf(w, "  line %d: %s\n", b.line, b.reason)
		}
		if more := inv.badCount - len(inv.bad); more > 0 {
			fmt.Fprintf(w, "  ... and %d more\n", more)
		}
	}
}

// printHosts lists the hosts no entry lists, busiest first: candidates for their own entry.
func (inv *inventory) printHosts(w io.Writer, top int) {
	hosts := make([]string, 0, len(inv.byHost))
	sum := inv.untracked
	for h, n := range inv.byHost {
		hosts = append(hosts, h)
		sum += n
	}
	distinct := fmt.Sprint(len(hosts))
	if inv.untracked > 0 {
		distinct = "more than " + distinct
	}
	fmt.Fprintf(w, "\nunknown hosts (delivered through %s): %s hosts, %d subscriptions\n", providers.FallbackID, distinct, sum)
	if len(hosts) == 0 {
		return
	}
	slices.SortFunc(hosts, func(a, b string) int {
		if d := inv.byHost[b] - inv.byHost[a]; d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	for _, h := range hosts[:min(top, len(hosts))] {
		fmt.Fprintf(w, "  %-40s %8d\n", h, inv.byHost[h])
	}
	if len(hosts) > top || inv.untracked > 0 {
		others, n := inv.untracked, len(hosts)-min(top, len(hosts))
		for _, h := range hosts[min(top, len(hosts)):] {
			others += inv.byHost[h]
		}
		label := fmt.Sprintf("others (%d hosts)", n)
		if inv.untracked > 0 {
			label = fmt.Sprintf("others (more than %d hosts)", n)
		}
		fmt.Fprintf(w, "  %-40s %8d\n", label, others)
	}
}

// printBudget shows what providers.Allocate gives each provider for this mix: the dispatcher
// weighs by a moving average of arrivals, which the subscriptions per provider approximate
// when every subscription gets about the same traffic.
func (inv *inventory) printBudget(w io.Writer, registry string, total int) {
	floors, ceilings := inv.reg.InFlightBounds()
	source := "from --total"
	switch b := inv.reg.Budget(); {
	case total > 0:
	case b != nil:
		total, source = b.TotalInFlight, "budget.total_in_flight of "+registry
	default:
		for _, c := range ceilings {
			total += c
		}
		source = registry + " sets no budget: the sum of max_in_flight"
	}
	weights := make(map[string]float64, len(inv.byProvider))
	for id, n := range inv.byProvider {
		weights[id] = float64(n)
	}
	shares := providers.Allocate(total, weights, floors, ceilings)
	fmt.Fprintf(w, "\nin-flight budget per replica: %d (%s), shared by subscriptions\n", total, source)
	fmt.Fprintf(w, "%-12s %7s %7s %9s\n", "provider", "floor", "ceiling", "in flight")
	sum := 0
	for _, p := range inv.reg.Providers() {
		fmt.Fprintf(w, "%-12s %7d %7d %9d\n", p.ID, floors[p.ID], ceilings[p.ID], shares[p.ID])
		sum += shares[p.ID]
	}
	fmt.Fprintf(w, "%-12s %7s %7s %9d\n", "total", "", "", sum)
}

func percent(n, of int) float64 {
	if of == 0 {
		return 0
	}
	return 100 * float64(n) / float64(of)
}
