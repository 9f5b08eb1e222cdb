package engine

import "testing"

// The engine names feed --engine's help and every "want ..." message.
func TestKindList(t *testing.T) {
	if got, want := KindList(), "rego, cel or native"; got != want {
		t.Errorf("KindList() = %q, want %q", got, want)
	}
}
