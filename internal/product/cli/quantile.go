package cli

import "time"

// Quantile is the p-th percentile of sorted, which must not be empty: the value at or below
// which p % of them lie (nearest rank).
func Quantile(sorted []time.Duration, p int) time.Duration {
	i := max(0, (len(sorted)*p+99)/100-1)
	return sorted[i]
}
