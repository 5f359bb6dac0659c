package main

import (
	"context"
	"fmt"
	"io"

	"github.com/webpush-gateway/webpush-gateway/internal/product/cli"
	"github.com/webpush-gateway/webpush-gateway/providers"
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
	inv := providers.NewInventory(reg)
	if err := inv.Read(in); err != nil {
		fmt.Fprintf(stderr, "gateway-worker inventory: %s: %v\n", name, err)
		return 2
	}
	printInventory(stdout, inv, name, regName, *total, *top)
	return 0
}

// printInventory writes the report. total > 0 overrides the budget to share.
func printInventory(w io.Writer, inv *providers.Inventory, name, registry string, total, top int) {
	fmt.Fprintf(w, "inventory of %s (routed by %s)\n", name, registry)
	fmt.Fprintf(w, "%d subscriptions read, %d lines could not be read\n\n", inv.Routed, inv.ProblemCount)
	shares, total, source := inv.Budget(total)
	fmt.Fprintf(w, "%-12s %13s %7s\n", "provider", "subscriptions", "share")
	for _, s := range shares {
		fmt.Fprintf(w, "%-12s %13d %6.1f%%\n", s.ID, inv.ByProvider[s.ID], percent(inv.ByProvider[s.ID], inv.Routed))
	}

	u := inv.Hosts(top)
	distinct := fmt.Sprint(u.Distinct)
	if u.Untracked {
		distinct = "more than " + distinct
	}
	fmt.Fprintf(w, "\nunknown hosts (delivered through %s): %s hosts, %d subscriptions\n", providers.FallbackID, distinct, u.Subscriptions)
	for _, h := range u.Top {
		fmt.Fprintf(w, "  %-40s %8d\n", h.Host, h.Subscriptions)
	}
	if u.OtherHosts > 0 || u.Untracked {
		label := fmt.Sprintf("others (%d hosts)", u.OtherHosts)
		if u.Untracked {
			label = fmt.Sprintf("others (more than %d hosts)", u.OtherHosts)
		}
		fmt.Fprintf(w, "  %-40s %8d\n", label, u.Others)
	}

	from := map[int]string{
		providers.BudgetGiven:     "from --total",
		providers.BudgetOfFile:    "budget.total_in_flight of " + registry,
		providers.BudgetOfCeiling: registry + " sets no budget: the sum of max_in_flight",
	}[source]
	fmt.Fprintf(w, "\nin-flight budget per replica: %d (%s), shared by subscriptions\n", total, from)
	fmt.Fprintf(w, "%-12s %7s %7s %9s\n", "provider", "floor", "ceiling", "in flight")
	sum := 0
	for _, s := range shares {
		fmt.Fprintf(w, "%-12s %7d %7d %9d\n", s.ID, s.Floor, s.Ceiling, s.InFlight)
		sum += s.InFlight
	}
	fmt.Fprintf(w, "%-12s %7s %7s %9d\n", "total", "", "", sum)

	if inv.ProblemCount > 0 {
		fmt.Fprintf(w, "\nlines that could not be read: %d\n", inv.ProblemCount)
		for _, b := range inv.Problems {
			fmt.Fprintf(w, "  line %d: %s\n", b.Line, b.Reason)
		}
		if more := inv.ProblemCount - len(inv.Problems); more > 0 {
			fmt.Fprintf(w, "  ... and %d more\n", more)
		}
	}
}

func percent(n, of int) float64 {
	if of == 0 {
		return 0
	}
	return 100 * float64(n) / float64(of)
}
