package stream

import "testing"

func TestMemory(t *testing.T) {
	env := newEnv(t)
	mem, err := NewKeyspace(env.c, Options{}).Memory(env.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(mem) != 1 || mem[0].Addr != env.srv.Addr() || mem[0].Role != "master" || mem[0].UsedMemory <= 0 ||
		mem[0].PeakMemory < mem[0].UsedMemory/2 || mem[0].Policy != "noeviction" {
		t.Errorf("Memory = %+v; want one master at %s with its figures", mem, env.srv.Addr())
	}
}
