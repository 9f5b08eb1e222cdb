package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/rollplan/rollplan/executor"
	"github.com/rollplan/rollplan/internal/plural"
	"github.com/rollplan/rollplan/planner/snapshot"
)

// isTerminal says whether w is a terminal (not a file, a pipe or
// /dev/null, which is a character device too).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
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
	line := progressLine(s.Status)
	if s.Note != "" {
		line += " — " + s.Note
	}
	p.draw(line)
}

// draw replaces the line.
func (p *progress) draw(line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clear()
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

// stageLine is rollplan plan's progress on a terminal: nothing while the
// plan is young (most are done in well under a second), then the stage
// it is at, redrawn as it moves. Stages are set from any goroutine;
// only the drawing goroutine writes.
type stageLine struct {
	line *progress
	mu   sync.Mutex
	text string
	stop chan struct{}
	done chan struct{}
}

// Progress is shown once a plan has run stageDelay, redrawn every
// stageEvery (variables for tests).
var (
	stageDelay = time.Second
	stageEvery = 200 * time.Millisecond
)

// startStageLine draws the stage on w once wait fires, then at each
// tick; nil (which does nothing) when w is not a terminal.
func startStageLine(w io.Writer, terminal bool, wait, ticks <-chan time.Time) *stageLine {
	if !terminal {
		return nil
	}
	s := &stageLine{line: &progress{w: w}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		select {
		case <-wait:
		case <-s.stop:
			return
		}
		drawn := ""
		for {
			s.mu.Lock()
			text := s.text
			s.mu.Unlock()
			if text != drawn {
				s.line.draw(text)
				drawn = text
			}
			select {
			case <-ticks:
			case <-s.stop:
				return
			}
		}
	}()
	return s
}

// planStageLine is startStageLine on stderr, on the wall clock.
func planStageLine(stderr io.Writer) (*stageLine, func()) {
	t := time.NewTicker(stageEvery)
	s := startStageLine(stderr, isTerminal(stderr), time.After(stageDelay), t.C)
	return s, func() {
		t.Stop()
		s.close()
	}
}

// set makes the stage text; the line shows it at the next tick.
func (s *stageLine) set(format string, args ...any) {
	if s == nil {
		return
	}
	text := fmt.Sprintf(format, args...)
	s.mu.Lock()
	s.text = text
	s.mu.Unlock()
}

// close stops drawing and removes the line (the plan follows).
func (s *stageLine) close() {
	if s == nil {
		return
	}
	close(s.stop)
	<-s.done
	s.line.done()
}

// loadStatus is the stage text of a snapshot load.
func loadStatus(st snapshot.Status) string {
	if st.Stage == snapshot.StageReading {
		if st.Total > 0 {
			return fmt.Sprintf("reading %s: %s of %s", st.File, megabytes(st.Done), megabytes(st.Total))
		}
		return fmt.Sprintf("reading %s: %s", st.File, megabytes(st.Done))
	}
	return fmt.Sprintf("decoding %s: %d of %s", st.File, st.Done, plural.Count(st.Total, "object", "objects"))
}

func megabytes(n int64) string {
	return fmt.Sprintf("%.1f MB", float64(n)/1e6)
}
