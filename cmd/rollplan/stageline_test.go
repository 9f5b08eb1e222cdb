package main

import (
	"bytes"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rollplan/rollplan/planner/snapshot"
)

// lockedBuffer is a fake terminal's screen, written by the drawing goroutine.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestStageLine(t *testing.T) {
	const clear = "\r\033[K"
	tests := []struct {
		name     string
		terminal bool
		// steps: a text to set, "wait" (the delay passes) or "tick".
		steps []string
		want  string
	}{
		{"quick plan: nothing", true, []string{"reading a.yaml", "planning"}, ""},
		{"not a terminal", false, []string{"reading a.yaml", "wait", "tick", "planning", "tick"}, ""},
		{"after the delay", true, []string{"reading a.yaml", "wait", "tick", "planning", "tick", "tick"}, "reading a.yaml" + clear + "planning" + clear},
		{"no stage yet", true, []string{"wait", "tick", "planning", "tick"}, "planning" + clear},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out lockedBuffer
			wait, ticks := make(chan time.Time), make(chan time.Time)
			s := startStageLine(&out, tt.terminal, wait, ticks)
			if (s == nil) == tt.terminal {
				t.Fatalf("startStageLine on a terminal %v returned %v", tt.terminal, s)
			}
			for _, step := range tt.steps {
				switch {
				case s == nil:
					s.set("%s", step) // a nil line does nothing
				case step == "wait":
					wait <- time.Time{}
				case step == "tick":
					ticks <- time.Time{} // the goroutine has drawn the line before it takes a tick
				default:
					s.set("%s", step)
				}
			}
			s.close()
			if got := out.String(); got != tt.want {
				t.Errorf("terminal shows %q, want %q", got, tt.want)
			}
		})
	}
}

// TestIsTerminal: files, pipes and /dev/null are not terminals (the
// last is a character device, which isTerminal took for one).
func TestIsTerminal(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for name, w := range map[string]*os.File{"pipe": w, "/dev/null": null, "file": f} {
		if isTerminal(w) {
			t.Errorf("%s is taken for a terminal", name)
		}
	}
}

func TestLoadStatus(t *testing.T) {
	for _, tt := range []struct {
		st   snapshot.Status
		want string
	}{
		{snapshot.Status{File: "s.json", Stage: snapshot.StageReading, Done: 12_000_000, Total: 37_000_000}, "reading s.json: 12.0 MB of 37.0 MB"},
		{snapshot.Status{File: "<stdin>", Stage: snapshot.StageReading, Done: 4_200_000}, "reading <stdin>: 4.2 MB"},
		{snapshot.Status{File: "s.json", Stage: snapshot.StageDecoding, Done: 256, Total: 20134}, "decoding s.json: 256 of 20134 objects"},
	} {
		if got := loadStatus(tt.st); got != tt.want {
			t.Errorf("loadStatus(%+v) = %q, want %q", tt.st, got, tt.want)
		}
	}
}

// TestPlanNoProgressOffTerminal: a plan whose stderr is not a terminal
// prints no progress line, however long it takes (here: no delay).
func TestPlanNoProgressOffTerminal(t *testing.T) {
	delay, every := stageDelay, stageEvery
	stageDelay, stageEvery = 0, time.Microsecond
	defer func() { stageDelay, stageEvery = delay, every }()
	_, stderr, err := run(t, "plan", "-f", "testdata/scenarios/deploy-rolling-10-25pct/snapshot.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(stderr, "\r\033") {
		t.Errorf("stderr holds a progress line: %q", stderr)
	}
}
