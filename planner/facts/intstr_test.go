package facts

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"
)

// The percent table of reference §1.2.
func TestScaleTable(t *testing.T) {
	ns := []int{0, 1, 2, 3, 4, 5, 10, 20}
	table := []struct {
		p        string
		up, down []int
	}{
		{"1%", []int{0, 1, 1, 1, 1, 1, 1, 1}, []int{0, 0, 0, 0, 0, 0, 0, 0}},
		{"10%", []int{0, 1, 1, 1, 1, 1, 1, 2}, []int{0, 0, 0, 0, 0, 0, 1, 2}},
		{"25%", []int{0, 1, 1, 1, 1, 2, 3, 5}, []int{0, 0, 0, 0, 1, 1, 2, 5}},
		{"30%", []int{0, 1, 1, 1, 2, 2, 3, 6}, []int{0, 0, 0, 0, 1, 1, 3, 6}},
		{"50%", []int{0, 1, 1, 2, 2, 3, 5, 10}, []int{0, 0, 1, 1, 2, 2, 5, 10}},
		{"75%", []int{0, 1, 2, 3, 3, 4, 8, 15}, []int{0, 0, 1, 2, 3, 3, 7, 15}},
		{"100%", []int{0, 1, 2, 3, 4, 5, 10, 20}, []int{0, 1, 2, 3, 4, 5, 10, 20}},
	}
	for _, row := range table {
		for i, n := range ns {
			if got := Scale(row.p, n, true); got != row.up[i] {
				t.Errorf("Scale(%s, %d, up) = %d, want %d", row.p, n, got, row.up[i])
			}
			if got := Scale(row.p, n, false); got != row.down[i] {
				t.Errorf("Scale(%s, %d, down) = %d, want %d", row.p, n, got, row.down[i])
			}
		}
	}
	for _, n := range ns {
		if got := Scale(3, n, false); got != 3 {
			t.Errorf("ints are not scaled: Scale(3, %d) = %d", n, got)
		}
	}
}

func TestIntOrPercentValidation(t *testing.T) {
	cases := []struct {
		v      intstr.IntOrString
		max100 bool
		want   any
		errHas string
	}{
		{intstr.FromInt32(3), true, 3, ""},
		{intstr.FromString("25%"), true, "25%", ""},
		{intstr.FromString("120%"), false, "120%", ""},
		{intstr.FromString("120%"), true, nil, "must not be greater than 100%"},
		{intstr.FromString("abc"), true, nil, `"abc" is not an integer or a percentage`},
		{intstr.FromString("5"), true, nil, "is not an integer or a percentage"},
		{intstr.FromString("-5%"), true, nil, "is not an integer or a percentage"},
		{intstr.FromInt32(-1), true, nil, "must be greater than or equal to 0"},
	}
	for _, c := range cases {
		got, err := IntOrPercent(&c.v, "spec.x", c.max100)
		if c.errHas != "" {
			if err == nil || !strings.Contains(err.Error(), c.errHas) || !strings.Contains(err.Error(), "spec.x") {
				t.Errorf("%v: error %v, want one naming spec.x containing %q", c.v.String(), err, c.errHas)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%v: got %v, %v; want %v", c.v.String(), got, err, c.want)
		}
	}
}

func FuzzParseIntOrPercentString(f *testing.F) {
	for _, s := range []string{"3", "25%", "abc", "120%", "-1", "", "%", "99999999999999999999%"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseIntOrPercentString(s, "x", true)
		if err != nil {
			return
		}
		for _, total := range []int{0, 1, 7, 1000} {
			up, down := Scale(v, total, true), Scale(v, total, false)
			if up < down || down < 0 {
				t.Fatalf("%q of %d: up %d < down %d or negative", s, total, up, down)
			}
			if str, ok := v.(string); ok && up > total {
				t.Fatalf("%q of %d rounds up to %d, above the total", str, total, up)
			}
		}
	})
}

// Budget sources show a percentage's exact share before rounding, the way
// the default strategy in Rego and CEL prints it too.
func TestHundredthsAndDescribePercent(t *testing.T) {
	for _, c := range []struct {
		a    int
		want string
	}{{0, "0"}, {300, "3"}, {250, "2.5"}, {240, "2.4"}, {198, "1.98"}, {5, "0.05"}, {90, "0.9"}, {100005, "1000.05"}} {
		if got := Hundredths(c.a); got != c.want {
			t.Errorf("Hundredths(%d) = %q, want %q", c.a, got, c.want)
		}
	}
	for _, c := range []struct {
		s       string
		total   int
		unit    string
		roundUp bool
		want    string
	}{
		{"33%", 6, "", true, "33% of 6 = 1.98, ceil: 2"},
		{"33%", 6, "", false, "33% of 6 = 1.98, floor: 1"},
		{"50%", 6, " expected pods", true, "50% of 6 expected pods = 3, ceil: 3"},
		{"1%", 5, "", true, "1% of 5 = 0.05, ceil: 1"},
		{"0%", 0, "", false, "0% of 0 = 0, floor: 0"},
	} {
		if got := DescribePercent(c.s, c.total, c.unit, c.roundUp); got != c.want {
			t.Errorf("DescribePercent(%q, %d, %q, %t) = %q, want %q", c.s, c.total, c.unit, c.roundUp, got, c.want)
		}
	}
}
