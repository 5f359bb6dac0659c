package limits

import (
	"fmt"
	"testing"
)

func TestProvenHostsRemembersGoodAnswersBounded(t *testing.T) {
	p := NewProvenHosts(3)
	if p.Proven("a:443") {
		t.Fatal("a host is proven before any answer")
	}
	gen := p.Generation()
	p.Prove("a:443")
	if !p.Proven("a:443") || p.Generation() == gen {
		t.Fatalf("after Prove: proven %v, generation %d (was %d); want proven and a new generation", p.Proven("a:443"), p.Generation(), gen)
	}
	gen = p.Generation()
	p.Prove("a:443") // again: no new host
	if p.Generation() != gen {
		t.Errorf("proving a proven host again changed the generation")
	}
	p.Prove("b:443")
	p.Prove("c:443")
	p.Prove("a:443") // a is now the most recently proven; b the least
	p.Prove("d:443")
	for host, want := range map[string]bool{"a:443": true, "b:443": false, "c:443": true, "d:443": true} {
		if got := p.Proven(host); got != want {
			t.Errorf("%s proven %v, want %v (table of 3, the least recently proven forgotten)", host, got, want)
		}
	}
	if n := p.Len(); n != 3 {
		t.Errorf("%d hosts remembered, want 3", n)
	}
	p.Forget("c:443")
	p.Forget("never-seen:443")
	if p.Proven("c:443") || p.Len() != 2 {
		t.Errorf("after Forget: c proven %v, %d hosts; want unproven and 2", p.Proven("c:443"), p.Len())
	}
}

func TestProvenHostsDefaultBound(t *testing.T) {
	p := NewProvenHosts(0)
	for i := range DefaultMaxHosts + 10 {
		p.Prove(fmt.Sprintf("h%d:443", i))
	}
	if n := p.Len(); n != DefaultMaxHosts {
		t.Errorf("%d hosts remembered, want DefaultMaxHosts (%d)", n, DefaultMaxHosts)
	}
}

// Only Prove counts as use: asking whether a host is proven does not keep it remembered.
func TestProvenHostsForgetsTheLeastRecentlyProvenHoweverAsked(t *testing.T) {
	p := NewProvenHosts(2)
	p.Prove("a:443")
	p.Prove("b:443")
	for range 3 {
		if !p.Proven("a:443") {
			t.Fatal("a is not proven")
		}
	}
	p.Prove("c:443") // a was proven before b: a goes
	for host, want := range map[string]bool{"a:443": false, "b:443": true, "c:443": true} {
		if got := p.Proven(host); got != want {
			t.Errorf("%s proven %v, want %v (table of 2, the least recently proven forgotten)", host, got, want)
		}
	}
}
