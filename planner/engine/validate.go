package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/validate/content"
)

// GroupByValues says, for messages, what a budget's groupBy may be.
const GroupByValues = `"zone", "node" or "label:<key>"`

// ValidGroupBy checks a budget's groupBy: empty (no groups), zone, node, or
// label:<key> with a valid label key (the values GroupKey knows).
func ValidGroupBy(by string) error {
	switch {
	case by == "", by == "zone", by == "node":
		return nil
	case strings.HasPrefix(by, "label:"):
		key := strings.TrimPrefix(by, "label:")
		if key == "" {
			return fmt.Errorf("groupBy %q: the label key after \"label:\" is empty", by)
		}
		if errs := content.IsLabelKey(key); len(errs) > 0 {
			return fmt.Errorf("groupBy %q: %q is not a valid label key: %s", by, key, errs[0])
		}
		return nil
	}
	return fmt.Errorf("groupBy %q: want %s", by, GroupByValues)
}

// ValidateBudget checks a budget as every engine must return it: a name, at
// least one limit, no negative limit, a known groupBy, maxGroups only with
// groupBy. Errors name the budget and the field; the engine adds the policy,
// the rule and the workload.
func ValidateBudget(b Budget) error {
	if b.Name == "" {
		return errors.New("a budget has no name: give every budget a non-empty name")
	}
	for _, f := range []struct {
		field string
		v     *int
	}{{"maxUnavailable", b.MaxUnavailable}, {"maxSurge", b.MaxSurge}, {"maxGroups", b.MaxGroups}} {
		if f.v != nil && *f.v < 0 {
			return fmt.Errorf("budget %q: %s %d: limits must be greater than or equal to 0", b.Name, f.field, *f.v)
		}
	}
	if b.MaxUnavailable == nil && b.MaxSurge == nil && b.MaxGroups == nil {
		return fmt.Errorf("budget %q sets none of maxUnavailable, maxSurge, maxGroups: set at least one", b.Name)
	}
	if err := ValidGroupBy(b.GroupBy); err != nil {
		return fmt.Errorf("budget %q: %w", b.Name, err)
	}
	if b.MaxGroups != nil && b.GroupBy == "" {
		return fmt.Errorf("budget %q: maxGroups needs groupBy (%s)", b.Name, GroupByValues)
	}
	return nil
}

// TimeoutError: the evaluation for one workload ran out of the engine's
// time (the policy timeout). Callers may name the setting that raises it.
type TimeoutError struct {
	// Workload: "Kind namespace/name".
	Workload string
	Timeout  time.Duration
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("policy evaluation for %s stopped after %s (policy timeout)", e.Workload, e.Timeout)
}

// Unwrap lets errors.Is(err, context.DeadlineExceeded) hold.
func (e *TimeoutError) Unwrap() error { return context.DeadlineExceeded }

// Timeout returns a TimeoutError when ctx, derived from parent with the
// timeout d, is past its deadline while parent is not: the engine's own
// timeout stopped the evaluation, not the caller. Otherwise nil.
func Timeout(parent, ctx context.Context, workload string, d time.Duration) error {
	if parent.Err() == nil && (errors.Is(ctx.Err(), context.DeadlineExceeded) || pastDeadline(ctx)) {
		return &TimeoutError{Workload: workload, Timeout: d}
	}
	return nil
}

// Stopped reports whether evaluation under ctx must stop: ctx is done, or
// its deadline has passed (a context's timer may fire a little later).
func Stopped(ctx context.Context) bool {
	return ctx.Err() != nil || pastDeadline(ctx)
}

func pastDeadline(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}
