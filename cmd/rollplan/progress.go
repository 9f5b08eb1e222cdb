package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/rollplan/rollplan/executor"
)

// isTerminal says whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// progress is apply's status line on a terminal: one line, redrawn after
// every step. Log lines written through it first clear the line, so they
// scroll above it.
type progress struct {
	mu    sync.Mutex
	w     io.Writer
	drawn bool
}

func (p *progress) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clear()
	return p.w.Write(b)
}

func (p *progress) clear() {
	if p.drawn {
		fmt.Fprint(p.w, "\r\033[K")
		p.drawn = false
	}
}

// step redraws the line from a step's status.
func (p *progress) step(s *executor.StepResult) {
	if s.Status == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clear()
	line := progressLine(s.Status)
	if s.Note != "" {
		line += " — " + s.Note
	}
	fmt.Fprint(p.w, line)
	p.drawn = true
}

// done removes the line (the final report follows).
func (p *progress) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clear()
}

// progressLine: waves done/total (when counted), pods updated/available,
// budgets in use.
func progressLine(st *executor.RolloutStatus) string {
	desired := st.Pods.Desired - st.Pods.Held
	var b strings.Builder
	fmt.Fprintf(&b, "%s/%s: ", st.Workload.Namespace, st.Workload.Name)
	if st.Waves.Total > 0 { // a controller's rollout has no count (the verdict says what is left)
		fmt.Fprintf(&b, "waves %d/%d, ", st.Waves.Done, st.Waves.Total)
	}
	fmt.Fprintf(&b, "pods %d/%d updated, %d available", st.Pods.Updated, desired, st.Pods.Available)
	if st.Pods.InFlight > 0 {
		fmt.Fprintf(&b, ", %d in flight", st.Pods.InFlight)
	}
	for _, bu := range st.Budgets {
		if bu.Advisory {
			continue
		}
		fmt.Fprintf(&b, ", %s %d/%d", bu.Name, bu.InUse, bu.Limit)
	}
	fmt.Fprintf(&b, " — %s", st.Verdict)
	return b.String()
}
