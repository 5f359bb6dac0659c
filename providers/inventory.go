package providers

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Bounds of an Inventory. An export is the operator's file, but its hosts are what browsers
// and clients supplied: memory and output stay bounded whatever it holds.
const (
	InventoryMaxLine      = 1 << 20 // a longer line is reported unreadable, not buffered
	inventoryMaxHosts     = 1 << 16 // distinct unknown hosts counted one by one; the rest only in Hosts' others
	InventoryShownProblem = 20      // unreadable lines kept one by one
)

// Inventory counts the subscriptions of an export (one a line: a PushSubscription, a job with
// "subscription", {"endpoint": ...}, a JSON string or a bare endpoint) by the provider the
// registry routes each to and by unknown host, for sizing a registry before traffic arrives.
type Inventory struct {
	reg *Registry
	// Routed is the lines routed to a provider; ByProvider counts them by provider id.
	Routed     int
	ByProvider map[string]int
	// Problems are the first InventoryShownProblem lines that could not be read, of
	// ProblemCount. Their reasons name what is wrong, never the line's content: an endpoint's
	// path is a credential.
	Problems     []LineProblem
	ProblemCount int

	byHost    map[string]int // unknown authority -> subscriptions, at most inventoryMaxHosts keys
	untracked int            // unknown-host subscriptions past inventoryMaxHosts distinct hosts
}

// LineProblem is a line of an export that could not be read, and why.
type LineProblem struct {
	Line   int
	Reason string
}

// NewInventory returns an empty Inventory that routes by reg.
func NewInventory(reg *Registry) *Inventory {
	return &Inventory{reg: reg, ByProvider: map[string]int{}, byHost: map[string]int{}}
}

// Read counts every line of in. Only an I/O error stops it; a line that cannot be read is
// recorded with its number and reading goes on.
func (inv *Inventory) Read(in io.Reader) error {
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
			inv.problem(n, fmt.Sprintf("longer than %d bytes", InventoryMaxLine))
		} else {
			inv.line(n, line)
		}
		if err == io.EOF {
			return nil
		}
	}
}

// readLine returns the next line without its end of line; tooLong when it exceeded
// InventoryMaxLine (the rest of it is skipped). err is io.EOF after the last line.
func readLine(r *bufio.Reader) (line []byte, tooLong bool, err error) {
	for {
		chunk, err := r.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) > InventoryMaxLine+2 { // +2: the \r\n that is not content
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

func (inv *Inventory) problem(n int, reason string) {
	inv.ProblemCount++
	if len(inv.Problems) < InventoryShownProblem {
		inv.Problems = append(inv.Problems, LineProblem{n, reason})
	}
}

// line routes line n.
func (inv *Inventory) line(n int, raw []byte) {
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
	case errors.Is(err, ErrNotHTTPS):
		inv.problem(n, "not https (Web Push endpoints are https only)")
		return
	case err != nil:
		// Resolve's texts never contain the endpoint.
		inv.problem(n, strings.TrimPrefix(err.Error(), "providers: "))
		return
	}
	inv.Routed++
	inv.ByProvider[rt.Provider.ID]++
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

// HostCount is the subscriptions of one unknown host.
type HostCount struct {
	Host          string
	Subscriptions int
}

// UnknownHosts are the hosts no entry lists, which the fallback delivers to: candidates for
// an entry of their own.
type UnknownHosts struct {
	// Top are the busiest hosts, by subscriptions and then by name.
	Top []HostCount
	// Distinct is the hosts counted one by one; Untracked says there were more than that.
	Distinct  int
	Untracked bool
	// Subscriptions is the subscriptions of every unknown host; Others those of the hosts
	// not in Top, OtherHosts of them (more than that when Untracked).
	Subscriptions, Others, OtherHosts int
}

// Hosts is the unknown hosts with the top busiest listed one by one.
func (inv *Inventory) Hosts(top int) UnknownHosts {
	hosts := make([]string, 0, len(inv.byHost))
	u := UnknownHosts{Subscriptions: inv.untracked, Others: inv.untracked, Untracked: inv.untracked > 0}
	for h, n := range inv.byHost {
		hosts = append(hosts, h)
		u.Subscriptions += n
	}
	u.Distinct = len(hosts)
	slices.SortFunc(hosts, func(a, b string) int {
		if d := inv.byHost[b] - inv.byHost[a]; d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	shown := min(top, len(hosts))
	for _, h := range hosts[:shown] {
		u.Top = append(u.Top, HostCount{h, inv.byHost[h]})
	}
	for _, h := range hosts[shown:] {
		u.Others += inv.byHost[h]
	}
	u.OtherHosts = len(hosts) - shown
	return u
}

// Where the in-flight total an Inventory's Budget shares comes from.
const (
	BudgetGiven     = iota // the caller's
	BudgetOfFile           // the registry's budget.total_in_flight
	BudgetOfCeiling        // the sum of max_in_flight: the registry sets no budget
)

// BudgetShare is one provider's part of the in-flight budget.
type BudgetShare struct {
	ID                       string
	Floor, Ceiling, InFlight int
}

// Budget shares total in-flight slots per replica (0: the registry's budget, else the sum
// of its max_in_flight; source says which) among the providers as Allocate does for this mix:
// the dispatcher weighs by a moving average of arrivals, which the subscriptions per provider
// approximate when every subscription gets about the same traffic.
func (inv *Inventory) Budget(total int) (shares []BudgetShare, used, source int) {
	floors, ceilings := inv.reg.InFlightBounds()
	switch b := inv.reg.Budget(); {
	case total > 0:
		source = BudgetGiven
	case b != nil:
		total, source = b.TotalInFlight, BudgetOfFile
	default:
		for _, c := range ceilings {
			total += c
		}
		source = BudgetOfCeiling
	}
	weights := make(map[string]float64, len(inv.ByProvider))
	for id, n := range inv.ByProvider {
		weights[id] = float64(n)
	}
	got := Allocate(total, weights, floors, ceilings)
	for _, p := range inv.reg.Providers() {
		shares = append(shares, BudgetShare{p.ID, floors[p.ID], ceilings[p.ID], got[p.ID]})
	}
	return shares, total, source
}
