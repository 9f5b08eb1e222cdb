package gate_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/rollplan/rollplan/gate"
	"github.com/rollplan/rollplan/gate/certs"
	"github.com/rollplan/rollplan/internal/measure"
	"github.com/rollplan/rollplan/planner/engine"
)

var (
	loadRun      = flag.Bool("gate.load", false, "run TestLoadLoopback: the gate and a no-op webhook under open-loop load over loopback TLS")
	loadRates    = flag.String("gate.load.rates", "500,1000", "TestLoadLoopback: request rates (per second), comma-separated")
	loadDuration = flag.Duration("gate.load.duration", 10*time.Second, "TestLoadLoopback: how long each target is driven at each rate")
	loadWorkers  = flag.Int("gate.load.workers", 64, "TestLoadLoopback: requests in flight at most (the rest wait, and their wait counts)")
	loadHTTP1    = flag.Bool("gate.load.http1", false, "TestLoadLoopback: HTTP/1.1 keep-alive connections instead of HTTP/2")
	loadTargets  = flag.String("gate.load.targets", "noop,rego,native", "TestLoadLoopback: webhooks to drive: noop, rego, native")
)

// The load test runs each webhook in a process of its own, as the API
// server and the gate are: TestLoadServer, started by TestLoadLoopback
// with these variables set, serves one and reports on stdout where.
const (
	envServe   = "ROLLPLAN_GATE_LOAD_SERVE" // noop, rego or native
	envCertDir = "ROLLPLAN_GATE_LOAD_CERTS" // tls.crt and tls.key
	listenLine = "gate-load-server "
)

// noopWebhook answers every AdmissionReview allowed: the floor a webhook
// served this way cannot go below (TLS, HTTP, decode, encode).
type noopWebhook struct{}

func (noopWebhook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil || review.Request == nil {
		http.Error(w, "bad AdmissionReview", http.StatusBadRequest)
		return
	}
	raw, err := json.Marshal(admissionv1.AdmissionReview{TypeMeta: review.TypeMeta,
		Response: &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(raw)
}

// timed records how long the handler takes with each request (inside the
// server: from the decoded HTTP request to the written response).
type timed struct {
	h    http.Handler
	mu   sync.Mutex
	took []time.Duration
}

func (t *timed) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	t.h.ServeHTTP(w, r)
	d := time.Since(start)
	t.mu.Lock()
	t.took = append(t.took, d)
	t.mu.Unlock()
}

// serverStats is what a server process reports (and forgets) at /stats.
type serverStats struct {
	Handler []time.Duration `json:"handler"`
	CPU     time.Duration   `json:"cpu"` // of the process since it started
}

func (t *timed) stats(w http.ResponseWriter, _ *http.Request) {
	t.mu.Lock()
	s := serverStats{Handler: t.took, CPU: measure.CPU()}
	t.took = nil
	t.mu.Unlock()
	_ = json.NewEncoder(w).Encode(s)
}

// TestLoadServer is the server process of TestLoadLoopback; skipped
// unless started by it.
func TestLoadServer(t *testing.T) {
	what, dir := os.Getenv(envServe), os.Getenv(envCertDir)
	if what == "" {
		t.Skip("the server process of TestLoadLoopback")
	}
	var h http.Handler = noopWebhook{}
	if what != "noop" {
		c := benchFixture(t)
		var e engine.Engine
		for _, x := range benchEngines(t) {
			if x.Name() == what {
				e = x
			}
		}
		if e == nil {
			t.Fatalf("%s=%q: want noop, rego or native", envServe, what)
		}
		h = benchGate(t, c, e)
	}
	tm := &timed{h: h}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr := make(chan string, 1)
	done := make(chan error, 1)
	s := &gate.Server{Handler: tm, Addr: "127.0.0.1:0", CertFile: filepath.Join(dir, "tls.crt"), KeyFile: filepath.Join(dir, "tls.key"),
		Log: slog.New(slog.DiscardHandler), Listening: func(a string) { addr <- a }}
	go func() { done <- s.Run(ctx) }()
	var url string
	select {
	case a := <-addr:
		url = "https://" + a + "/validate"
	case err := <-done:
		t.Fatalf("server: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/stats", tm.stats)
	go func() { _ = http.Serve(l, mux) }()
	fmt.Printf("%s%s http://%s/stats\n", listenLine, url, l.Addr())
	// Serve until the load test closes stdin (or exits).
	_, _ = io.Copy(io.Discard, os.Stdin)
	cancel()
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		t.Error(err)
	}
}

// loadTarget is one webhook process.
type loadTarget struct {
	name, url, stats string
}

// startServer starts a TestLoadServer process serving what.
func startServer(t *testing.T, what, dir string) loadTarget {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLoadServer$", "-test.timeout=0")
	cmd.Env = append(os.Environ(), envServe+"="+what, envCertDir+"="+dir)
	if os.Getenv("GOGC") == "" {
		cmd.Env = append(cmd.Env, "GOGC=400") // as rollplan gate runs
	}
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = stdin.Close()
		wait := make(chan error, 1)
		go func() { wait <- cmd.Wait() }()
		select {
		case <-wait:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-wait
		}
	})
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		if rest, ok := strings.CutPrefix(lines.Text(), listenLine); ok {
			url, stats, _ := strings.Cut(rest, " ")
			go func() { _, _ = io.Copy(io.Discard, stdout) }()
			name := "gate (" + what + ")"
			if what == "noop" {
				name = "no-op webhook"
			}
			return loadTarget{name: name, url: url, stats: stats}
		}
	}
	t.Fatalf("server process for %s exited without listening: %v", what, lines.Err())
	return loadTarget{}
}

func (lt loadTarget) readStats(t *testing.T) serverStats {
	t.Helper()
	resp, err := http.Get(lt.stats)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var s serverStats
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatal(err)
	}
	slices.Sort(s.Handler)
	return s
}

// loadResult is one target driven at one rate.
type loadResult struct {
	target   string
	rate     int
	sent     int
	errors   int
	denied   int
	firstErr error
	lat      []time.Duration // from the request's scheduled time, sorted
	lag      []time.Duration // from the scheduled time to the send, sorted
	handler  []time.Duration // in the server's handler, sorted
	elapsed  time.Duration
	cpu      time.Duration // of the load generator
	srvCPU   time.Duration // of the server process
}

// drive sends rate requests per second for d, each at its scheduled time
// (open loop: a slow answer does not delay the next request), with at most
// workers in flight; a request that waits for a worker waits on the
// clock, so latency is measured from its scheduled time.
func drive(client *http.Client, url string, body func(i int) []byte, rate int, d time.Duration, workers int) loadResult {
	n := int(float64(rate) * d.Seconds())
	type job struct {
		i  int
		at time.Time
	}
	jobs := make(chan job, n)
	lat := make([]time.Duration, n)
	lag := make([]time.Duration, n)
	var errs, denied atomic.Int64
	var firstErr atomic.Pointer[error]
	fail := func(err error) {
		errs.Add(1)
		firstErr.CompareAndSwap(nil, &err)
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for j := range jobs {
				lag[j.i] = time.Since(j.at)
				resp, err := client.Post(url, "application/json", bytes.NewReader(body(j.i)))
				if err != nil {
					fail(err)
					lat[j.i] = time.Since(j.at)
					continue
				}
				raw, err := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				lat[j.i] = time.Since(j.at)
				switch {
				case err != nil:
					fail(err)
				case resp.StatusCode != http.StatusOK:
					fail(fmt.Errorf("status %d: %s", resp.StatusCode, raw))
				case !bytes.Contains(raw, []byte(`"allowed":true`)):
					denied.Add(1)
				}
			}
		})
	}
	interval := time.Second / time.Duration(rate)
	cpu0 := measure.CPU()
	start := time.Now()
	for i := range n {
		at := start.Add(time.Duration(i) * interval)
		if wait := time.Until(at); wait > 0 {
			time.Sleep(wait)
		}
		jobs <- job{i, at}
	}
	close(jobs)
	wg.Wait()
	r := loadResult{rate: rate, sent: n, errors: int(errs.Load()), denied: int(denied.Load()), lat: lat, lag: lag,
		elapsed: time.Since(start), cpu: measure.CPU() - cpu0}
	if e := firstErr.Load(); e != nil {
		r.firstErr = *e
	}
	slices.Sort(r.lat)
	slices.Sort(r.lag)
	return r
}

// TestLoadLoopback drives the gate (Rego default strategy, and native)
// and a no-op webhook at fixed request rates and prints the latency
// percentiles, end to end and inside the handler. Each webhook runs in a
// process of its own (TestLoadServer), served by gate.Server over TLS on
// 127.0.0.1; the gates read the benchmarks' cache of 10,000 pods. The
// mix: 4 of 5 requests are dry-run evictions of 1,000 pods across the 100
// StatefulSets (they never reserve, so every one is judged against the
// same state), 1 of 5 a pod DELETE of pod 0 of a set (admitted; it
// reserves that pod again, so the store holds one reservation per set).
// The load generator shares the machine. Off by default:
//
//	go test ./gate -run TestLoadLoopback -gate.load -v -timeout 10m
func TestLoadLoopback(t *testing.T) {
	if !*loadRun {
		t.Skip("a load test: run with -gate.load")
	}
	var rates []int
	for f := range strings.SplitSeq(*loadRates, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			t.Fatalf("-gate.load.rates %q: want positive whole numbers", *loadRates)
		}
		rates = append(rates, n)
	}

	dir := t.TempDir()
	caPEM, certPEM, keyPEM, err := certs.ForHosts(nil, []net.IP{net.IPv4(127, 0, 0, 1)}, 24*time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("CA does not parse")
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2: !*loadHTTP1, MaxIdleConnsPerHost: *loadWorkers, IdleConnTimeout: time.Minute}
	proto := "HTTP/2"
	if *loadHTTP1 {
		proto = "HTTP/1.1"
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{} // no h2
	}
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	defer tr.CloseIdleConnections()

	cases := benchCases(t)
	evictions, deletes := cases[0].bodies, cases[1].bodies
	body := func(i int) []byte {
		if i%5 == 4 {
			return deletes[(i/5)%len(deletes)]
		}
		return evictions[(i-i/5)%len(evictions)]
	}

	var targets []loadTarget
	for what := range strings.SplitSeq(*loadTargets, ",") {
		targets = append(targets, startServer(t, strings.TrimSpace(what), dir))
	}
	// Warm up: connections, the engines' first evaluations, the heaps.
	for _, tg := range targets {
		if r := drive(client, tg.url, body, 200, 2*time.Second, *loadWorkers); r.errors > 0 {
			t.Fatalf("%s: %d errors warming up, first: %v", tg.name, r.errors, r.firstErr)
		}
	}
	var results []loadResult
	for _, rate := range rates {
		for _, tg := range targets {
			before := tg.readStats(t)
			r := drive(client, tg.url, body, rate, *loadDuration, *loadWorkers)
			after := tg.readStats(t)
			r.target, r.handler, r.srvCPU = tg.name, after.Handler, after.CPU-before.CPU
			results = append(results, r)
			if r.errors > 0 {
				t.Errorf("%s at %d/s: %d errors, first: %v", tg.name, rate, r.errors, r.firstErr)
			}
			if r.denied > 0 {
				t.Errorf("%s at %d/s: %d requests denied, want none", tg.name, rate, r.denied)
			}
		}
	}

	ms := func(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d.Microseconds())/1e3) }
	var out strings.Builder
	fmt.Fprintf(&out, "open loop, %s over loopback TLS, %s per target and rate, at most %d in flight; latency in ms from each request's scheduled send;\n", proto, *loadDuration, *loadWorkers)
	fmt.Fprintf(&out, "handler: inside the server process; send lag: from the scheduled time to the send (the load generator's own delay)\n\n")
	fmt.Fprintf(&out, "| target | rate/s | sent | answered/s | errors | p50 | p90 | p99 | max | p99 ÷ no-op | handler p50 | handler p99 | send lag p99 | server CPU (cores) | client CPU (cores) |\n")
	fmt.Fprintf(&out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	noop := map[int]time.Duration{}
	for _, r := range results {
		if r.target == "no-op webhook" {
			noop[r.rate] = percentile(r.lat, 99)
		}
	}
	for _, r := range results {
		p99 := percentile(r.lat, 99)
		ratio := "—"
		if n := noop[r.rate]; r.target != "no-op webhook" && n > 0 {
			ratio = fmt.Sprintf("%.1f×", float64(p99)/float64(n))
		}
		fmt.Fprintf(&out, "| %s | %d | %d | %.0f | %d | %s | %s | %s | %s | %s | %s | %s | %s | %.2f | %.2f |\n", r.target, r.rate, r.sent, float64(r.sent)/r.elapsed.Seconds(), r.errors,
			ms(percentile(r.lat, 50)), ms(percentile(r.lat, 90)), ms(p99), ms(r.lat[len(r.lat)-1]), ratio,
			ms(percentile(r.handler, 50)), ms(percentile(r.handler, 99)), ms(percentile(r.lag, 99)),
			r.srvCPU.Seconds()/r.elapsed.Seconds(), r.cpu.Seconds()/r.elapsed.Seconds())
	}
	t.Log("\n" + out.String())
}
