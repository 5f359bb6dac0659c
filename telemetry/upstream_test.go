package telemetry

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestUpstreamGroupsBounded: the groups of a stream are summed over the shards and at most
// MaxUpstreamGroups of them exported, the largest lags; the count of groups says how many
// there are; a stream outside the record streams is left out.
func TestUpstreamGroupsBounded(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg, MetricsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := testutil.GatherAndCount(reg, UpstreamGroupLag, UpstreamGroups, RedisMemoryUsed); n != 0 {
		t.Fatalf("%d upstream series before the first read; want none", n)
	}
	var gs []UpstreamGroup
	for i := range MaxUpstreamGroups + 5 {
		for shard := range 2 {
			gs = append(gs, UpstreamGroup{Stream: StreamResults, Group: fmt.Sprintf("g%02d", i), Lag: int64(i), Pending: int64(shard)})
		}
	}
	gs = append(gs, UpstreamGroup{Stream: "lane:fcm", Group: "x", Lag: 1}, UpstreamGroup{Stream: StreamGone, Group: "pruner", Lag: 7})
	m.SetUpstream(gs)
	if n, _ := testutil.GatherAndCount(reg, UpstreamGroupLag); n != MaxUpstreamGroups+1 {
		t.Errorf("%d lag series; want %d results groups and gone's one", n, MaxUpstreamGroups+1)
	}
	f, _ := reg.Gather()
	values := map[string]float64{}
	for _, fam := range f {
		for _, mt := range fam.GetMetric() {
			key := fam.GetName() // then the label values, by label name
			for _, l := range mt.GetLabel() {
				key += "," + l.GetValue()
			}
			values[key] = mt.GetGauge().GetValue()
		}
	}
	top := fmt.Sprintf("g%02d", MaxUpstreamGroups+4)
	for key, want := range map[string]float64{
		UpstreamGroupLag + "," + top + ",results":     2 * float64(MaxUpstreamGroups+4),
		UpstreamGroupPending + "," + top + ",results": 1,
		UpstreamGroupLag + ",pruner,gone":             7,
		UpstreamGroups + ",results":                   MaxUpstreamGroups + 5,
		UpstreamGroups + ",dead":                      0,
	} {
		if got, ok := values[key]; !ok || got != want {
			t.Errorf("%s = %v (%v); want %v", key, got, ok, want)
		}
	}
	if _, ok := values[UpstreamGroupLag+",g00,results"]; ok {
		t.Errorf("the group with the smallest lag is exported past the bound")
	}
	m.SetRedisMemory([]RedisNode{{Used: 10, MaxMemory: 100}})
	if n, _ := testutil.GatherAndCount(reg, RedisMemoryUsed, RedisMaxmemory); n != 2 {
		t.Errorf("%d memory series; want 2", n)
	}
}
