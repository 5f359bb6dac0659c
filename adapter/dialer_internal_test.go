package adapter

import (
	"net/netip"
	"testing"
)

// TestCheckAddr covers what an endpoint URL cannot express but a dial address could carry.
func TestCheckAddr(t *testing.T) {
	tests := []struct {
		addr    string
		blocked bool
	}{
		{"fe80::1%eth0", true},
		{"::ffff:169.254.169.254", true},
		{"2001:0:4136:e378:8000:63bf:3fff:fdd2", true}, // Teredo
		{"::10.0.0.1", true},                           // IPv4-compatible
		{"93.184.216.34", false},
		{"2606:2800:220:1:248:1893:25c8:1946", false},
	}
	for _, tc := range tests {
		err := checkAddr(netip.MustParseAddr(tc.addr), nil)
		if (err != nil) != tc.blocked {
			t.Errorf("checkAddr(%s) = %v, want blocked %v", tc.addr, err, tc.blocked)
		}
	}
}
