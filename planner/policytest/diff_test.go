package policytest

import (
	"strings"
	"testing"
)

func TestLineDiff(t *testing.T) {
	if d := lineDiff([]string{"a", "b"}, []string{"a", "b"}); d != "" {
		t.Errorf("equal inputs: %q", d)
	}
	want := strings.Split("1 2 3 4 5 6 7 8 9 10 11 12 13 14 15", " ")
	got := append([]string{}, want...)
	got[1] = "two"
	got = append(got[:12], append([]string{"twelve-and-a-half"}, got[12:]...)...)
	exp := `@@ -1,5 +1,5 @@
  1
- 2
+ two
  3
  4
  5
@@ -10,6 +10,7 @@
  10
  11
  12
+ twelve-and-a-half
  13
  14
  15`
	if d := lineDiff(want, got); d != exp {
		t.Errorf("lineDiff:\n%s\nwant:\n%s", d, exp)
	}
	if d := listDiff([]string{"a", "b"}, []string{"b", "c"}); d != "- a\n  b\n+ c" {
		t.Errorf("listDiff: %q", d)
	}
}
