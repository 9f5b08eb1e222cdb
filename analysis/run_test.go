package analysis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

// fakeProvider answers from a script, one step per call; a step may
// advance the fake clock (a slow query) or cancel the run.
type fakeProvider struct {
	mu     sync.Mutex
	clock  *testingclock.FakeClock
	script []fakeStep
	calls  int
}

type fakeStep struct {
	value  float64
	err    string
	takes  time.Duration
	cancel context.CancelFunc
}

func (f *fakeProvider) Measure(ctx context.Context, m Measurement, t Target, now time.Time) Result {
	f.mu.Lock()
	s := f.script[f.calls]
	f.calls++
	f.mu.Unlock()
	if s.takes > 0 {
		f.clock.Step(s.takes)
	}
	if s.cancel != nil {
		s.cancel()
	}
	if s.err != "" {
		return Result{Name: m.Name, Taken: now, Error: s.err}
	}
	return Result{Name: m.Name, Value: s.value + float64(t.Wave), Taken: now}
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func TestRun(t *testing.T) {
	valid := Measurement{Name: "errors", Provider: ProviderPrometheus, Query: "up", Count: 3, Interval: time.Minute}
	for _, tc := range []struct {
		name      string
		m         Measurement
		script    func(cancel context.CancelFunc) []fakeStep
		want      []string // value@offset or error@offset
		wantErr   string
		wantCalls int
	}{
		{
			name: "count times, interval apart, errors kept",
			m:    valid,
			script: func(context.CancelFunc) []fakeStep {
				return []fakeStep{{value: 1}, {err: "prometheus down"}, {value: 3}}
			},
			want: []string{"11@0s", "prometheus down@1m0s", "13@2m0s"}, wantCalls: 3,
		},
		{
			name: "a slow measurement delays the next, which follows at once",
			m:    valid,
			script: func(context.CancelFunc) []fakeStep {
				return []fakeStep{{value: 1, takes: 90 * time.Second}, {value: 2, takes: 10 * time.Second}, {value: 3}}
			},
			want: []string{"11@0s", "12@1m30s", "13@2m0s"}, wantCalls: 3,
		},
		{
			name:   "once",
			m:      Measurement{Name: "once", Provider: ProviderWeb, Query: "http://x", Count: 1, Web: WebRequest{JSONPath: ".v"}},
			script: func(context.CancelFunc) []fakeStep { return []fakeStep{{value: 5}} },
			want:   []string{"15@0s"}, wantCalls: 1,
		},
		{
			name: "cancelled during the first: what was taken, and the context's error",
			m:    valid,
			script: func(cancel context.CancelFunc) []fakeStep {
				return []fakeStep{{value: 1, cancel: cancel}}
			},
			want: []string{"11@0s"}, wantErr: "context canceled", wantCalls: 1,
		},
		{
			name:    "invalid: nothing measured",
			m:       Measurement{Name: "bad", Provider: ProviderPrometheus, Query: "up", Count: 2},
			script:  func(context.CancelFunc) []fakeStep { return nil },
			wantErr: `measurement "bad": interval 0s with count 2`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := testingclock.NewFakeClock(t0)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			p := &fakeProvider{clock: clock, script: tc.script(cancel)}
			results, err := runWithClock(t, ctx, p, tc.m, Target{Wave: 10}, clock)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("error %v, want %q", err, tc.wantErr)
			}
			var got []string
			for _, r := range results {
				v := fmt.Sprint(r.Value)
				if r.Failed() {
					v = r.Error
				}
				got = append(got, fmt.Sprintf("%s@%s", v, r.Taken.Sub(t0)))
			}
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("results %q, want %q", got, tc.want)
			}
			if p.calls != tc.wantCalls {
				t.Errorf("%d calls, want %d", p.calls, tc.wantCalls)
			}
		})
	}
}

// Cancelling while Run waits for the next interval returns at once, with
// the results taken so far.
func TestRunCancelWhileWaiting(t *testing.T) {
	clock := testingclock.NewFakeClock(t0)
	ctx, cancel := context.WithCancel(context.Background())
	p := &fakeProvider{clock: clock, script: []fakeStep{{value: 1}, {value: 2}}}
	done := make(chan struct{})
	var results []Result
	var err error
	go func() {
		results, err = Run(ctx, p, Measurement{Name: "m", Provider: ProviderPrometheus, Query: "up", Count: 2, Interval: time.Hour}, Target{}, clock)
		close(done)
	}()
	for !clock.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return when cancelled")
	}
	if !errors.Is(err, context.Canceled) || len(results) != 1 || results[0].Value != 1 {
		t.Errorf("results %+v, error %v; want the first result and context.Canceled", results, err)
	}
}

// runWithClock runs Run and steps the fake clock to each wait's end.
func runWithClock(t *testing.T, ctx context.Context, p Provider, m Measurement, tg Target, clock *testingclock.FakeClock) ([]Result, error) {
	t.Helper()
	done := make(chan struct{})
	var results []Result
	var err error
	go func() {
		results, err = Run(ctx, p, m, tg, clock)
		close(done)
	}()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case <-done:
			return results, err
		case <-deadline:
			t.Fatal("Run did not return")
		default:
		}
		if clock.HasWaiters() {
			clock.Step(time.Second)
		} else {
			time.Sleep(time.Millisecond)
		}
	}
}

func TestProviders(t *testing.T) {
	clock := testingclock.NewFakeClock(t0)
	ps := Providers{ProviderPrometheus: &fakeProvider{clock: clock, script: []fakeStep{{value: 4}}}}
	if r := ps.Measure(context.Background(), Measurement{Name: "p", Provider: ProviderPrometheus}, Target{}, t0); r.Failed() || r.Value != 4 {
		t.Errorf("prometheus: %+v, want 4", r)
	}
	r := ps.Measure(context.Background(), Measurement{Name: "w", Provider: ProviderWeb}, Target{}, t0)
	if !r.Failed() || r.Error != `measurement "w": provider "web" is not configured` || !r.Taken.Equal(t0) {
		t.Errorf("web: %+v, want an error saying it is not configured", r)
	}
}
