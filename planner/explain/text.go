package explain

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// WriteText prints the explanation for a person, one decision a line, as
// `rollplan explain POD` prints it.
func (e Explanation) WriteText(w io.Writer) error {
	out := bufio.NewWriter(w)
	fmt.Fprintf(out, "pod %s/%s of %s %s\n", e.Namespace, e.Pod, e.Workload.Kind, e.Workload.Name)
	fmt.Fprintf(out, "  revision:    %s (update revision %s)\n", e.Revision, e.UpdateRevision)
	s := e.State
	state := fmt.Sprintf("phase %s, ready %t, available %t", s.Phase, s.Ready, s.Available)
	if s.Terminating {
		state += ", terminating"
	}
	fmt.Fprintf(out, "  state:       %s, node %q, zone %q, restarts %d\n", state, s.Node, s.Zone, s.Restarts)
	if e.Updated {
		fmt.Fprintln(out, "  decision:    already at the update revision; nothing to do")
		return out.Flush()
	}
	fmt.Fprintln(out, "  changes:")
	for _, c := range e.Changes {
		how := "a running pod can take it (in place)"
		if !c.InPlace {
			how = "needs a new pod: " + c.Detail
		}
		fmt.Fprintf(out, "    - %s (%s): %s\n", c.Path, c.Class, how)
	}
	if sc := e.Scope; sc != nil {
		if !sc.InRollout {
			fmt.Fprintf(out, "  scope:       held: %s\n", sc.HeldReason)
			if sc.Override == "" {
				return out.Flush()
			}
			// The policy holds it, but its controller rolls it anyway:
			// the rest is what the plan does with it.
			fmt.Fprintf(out, "               (Go overrode the policy: %s)\n", sc.Override)
		} else {
			fmt.Fprintln(out, "  scope:       in this rollout")
		}
	}
	if el := e.Eligibility; el != nil {
		fmt.Fprintf(out, "  eligibility: %s: %s\n", el.Action, strings.Join(el.Reasons, "; "))
		if el.OptIn != "" {
			fmt.Fprintf(out, "               (%s)\n", el.OptIn)
		}
		if sc := e.Scope; sc != nil && sc.InRollout && sc.Override != "" {
			fmt.Fprintf(out, "               (Go overrode the policy: %s)\n", sc.Override)
		}
		fmt.Fprintf(out, "  order key:   %v\n", e.OrderKey)
	}
	wv := e.Wave
	switch {
	case wv == nil:
		return out.Flush()
	case len(wv.Halted) > 0:
		fmt.Fprintf(out, "  wave:        none: the rollout is halted (%s)\n", strings.Join(wv.Halted, "; "))
		return out.Flush()
	case wv.Index == 0:
		fmt.Fprintf(out, "  wave:        none (%s)\n", wv.None)
		return out.Flush()
	}
	fmt.Fprintf(out, "  wave:        %d of %d, starting at %s, pacing %s\n", wv.Index, wv.Of, wv.Start, wv.Pacing)
	if e.Waited != nil {
		fmt.Fprintf(out, "  waited:      %s\n", WaitText(e.Waited))
	}
	for _, a := range e.Actions {
		fmt.Fprintf(out, "  action:      %s: %s\n", a.Description, strings.Join(a.Reasons, "; "))
	}
	fmt.Fprintln(out, "  budgets:")
	for _, b := range e.Budgets {
		adv := ""
		if b.Advisory {
			adv = " (advisory)"
		}
		fmt.Fprintf(out, "    - %s: limit %d %s, %d in use at snapshot time%s — %s\n", b.Name, b.Limit, b.Type, b.InUse, adv, b.Source)
	}
	if e.Kubernetes != "" {
		fmt.Fprintf(out, "  kubernetes:  %s\n", e.Kubernetes)
	}
	return out.Flush()
}
