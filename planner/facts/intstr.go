package facts

import (
	"fmt"
	"regexp"
	"strconv"

	"k8s.io/apimachinery/pkg/util/intstr"
)

var percentRE = regexp.MustCompile(`^[0-9]+%$`)

// IntOrPercent validates an int-or-percent value as the API does (§1.1) and
// returns it as a policy value: an int, or a "N%" string. nil stays nil.
// max100 applies the "not more than 100%" rule (every field but a
// Deployment's maxSurge).
func IntOrPercent(v *intstr.IntOrString, field string, max100 bool) (any, error) {
	if v == nil {
		return nil, nil
	}
	if v.Type == intstr.Int {
		if v.IntVal < 0 {
			return nil, fmt.Errorf("%s: %d must be greater than or equal to 0", field, v.IntVal)
		}
		return int(v.IntVal), nil
	}
	return ParsePercent(v.StrVal, field, max100)
}

// ParsePercent validates a string form: "N%" with N a whole number.
func ParsePercent(s, field string, max100 bool) (any, error) {
	if !percentRE.MatchString(s) {
		return nil, fmt.Errorf("%s: %q is not an integer or a percentage like \"25%%\"", field, s)
	}
	n, err := strconv.Atoi(s[:len(s)-1])
	if err != nil {
		return nil, fmt.Errorf("%s: %q: %w", field, s, err)
	}
	if max100 && n > 100 {
		return nil, fmt.Errorf("%s: %q must not be greater than 100%%", field, s)
	}
	return s, nil
}

// ParseIntOrPercentString parses an annotation value: "3" or "25%".
func ParseIntOrPercentString(s, field string, max100 bool) (any, error) {
	if n, err := strconv.Atoi(s); err == nil {
		if n < 0 {
			return nil, fmt.Errorf("%s: %d must be greater than or equal to 0", field, n)
		}
		return n, nil
	}
	return ParsePercent(s, field, max100)
}

// Scale resolves an int-or-percent policy value against total (§1.1):
// ints unchanged, percents rounded up or down with integer arithmetic.
func Scale(v any, total int, roundUp bool) int {
	switch x := v.(type) {
	case int:
		return x
	case string:
		p, _ := strconv.Atoi(x[:len(x)-1])
		if roundUp {
			return (p*total + 99) / 100
		}
		return p * total / 100
	}
	return 0
}

// Hundredths prints a/100 exactly for a ≥ 0, without trailing zeros:
// "2", "2.4", "1.98". A percentage p of total is Hundredths(p × total):
// what the budget sources show before rounding ("40% of 6 = 2.4, floor: 2").
// The default strategy in Rego and CEL prints it the same way.
func Hundredths(a int) string {
	whole, frac := a/100, a%100
	switch {
	case frac == 0:
		return strconv.Itoa(whole)
	case frac%10 == 0:
		return fmt.Sprintf("%d.%d", whole, frac/10)
	}
	return fmt.Sprintf("%d.%02d", whole, frac)
}

// DescribePercent says how percentage s ("40%") resolved against total:
// "40% of 6 = 2.4, floor: 2" (ceil when roundUp): the percent as written,
// the exact product, the rounding and the result. unit follows total
// (" expected pods").
func DescribePercent(s string, total int, unit string, roundUp bool) string {
	p, _ := strconv.Atoi(s[:len(s)-1])
	rounding := "floor"
	if roundUp {
		rounding = "ceil"
	}
	return fmt.Sprintf("%s of %d%s = %s, %s: %d", s, total, unit, Hundredths(p*total), rounding, Scale(s, total, roundUp))
}
