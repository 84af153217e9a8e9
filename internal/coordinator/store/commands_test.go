package store

import (
	"errors"
	"testing"
)

// TestCommandTable: every command type has one named entry in the dispatch table, the names
// are distinct, and a type outside the table is rejected without touching the state.
func TestCommandTable(t *testing.T) {
	seen := map[string]op{}
	for o := opSubmit; o < opCount; o++ {
		c := commands[o]
		if c.name == "" || c.apply == nil {
			t.Fatalf("command type %d has no entry (name %q)", o, c.name)
		}
		if prev, dup := seen[c.name]; dup {
			t.Fatalf("command types %d and %d are both named %q", prev, o, c.name)
		}
		seen[c.name] = o
		if o.String() != c.name {
			t.Errorf("op(%d).String() = %q, want %q", o, o.String(), c.name)
		}
	}
	h := newHarness(t)
	for _, bad := range [][]byte{{0}, {byte(opCount)}, {255, 1, 2}} {
		resp := h.f.apply(1, bad)
		if !errors.Is(resp.Err, ErrInvalidArgument) {
			t.Errorf("command type %d: %v, want ErrInvalidArgument", bad[0], resp.Err)
		}
	}
	if jobs := h.f.jobViews(); len(jobs) != 0 {
		t.Errorf("rejected commands changed the state: %v", jobs)
	}
}
