package plural

import "testing"

func TestCountAndNoun(t *testing.T) {
	cases := []struct {
		n           int
		one, many   string
		count, noun string
	}{
		{n: 0, one: "wave", many: "waves", count: "0 waves", noun: "waves"},
		{n: 1, one: "wave", many: "waves", count: "1 wave", noun: "wave"},
		{n: 2, one: "wave", many: "waves", count: "2 waves", noun: "waves"},
		{n: 1, one: "replica", many: "replicas", count: "1 replica", noun: "replica"},
		{n: 12, one: "policy", many: "policies", count: "12 policies", noun: "policies"},
		{n: -1, one: "pod", many: "pods", count: "-1 pods", noun: "pods"},
	}
	for _, c := range cases {
		if got := Count(c.n, c.one, c.many); got != c.count {
			t.Errorf("Count(%d, %q, %q) = %q, want %q", c.n, c.one, c.many, got, c.count)
		}
		if got := Noun(c.n, c.one, c.many); got != c.noun {
			t.Errorf("Noun(%d, %q, %q) = %q, want %q", c.n, c.one, c.many, got, c.noun)
		}
	}
	// Counts come as other integer types too.
	if got := Count(int64(1), "object", "objects"); got != "1 object" {
		t.Errorf("Count(int64(1)) = %q, want \"1 object\"", got)
	}
	if got := Count(int32(3), "replica", "replicas"); got != "3 replicas" {
		t.Errorf("Count(int32(3)) = %q, want \"3 replicas\"", got)
	}
}
