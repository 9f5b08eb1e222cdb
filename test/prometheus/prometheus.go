// Package prometheus runs a real Prometheus server for a test: Debian's
// prometheus binary on loopback, with a data directory of the test's own
// and a generated configuration that scrapes the given /metrics endpoints
// every second and evaluates the given rule files every second. A test
// queries it as a user would (the HTTP API), so what it checks is what
// Prometheus makes of rollplan's metrics and rules, not a reading of them.
//
// The binaries come from Debian's prometheus package (apt-get install
// prometheus: prometheus and promtool). Where they are missing a test skips,
// except in CI (CI=true), where it fails: CI installs them (.ci/run).
package prometheus

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// Binary is the path of a binary of the prometheus package (prometheus,
// promtool). Missing, it skips the test, or fails it in CI.
func Binary(t testing.TB, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err == nil {
		return path
	}
	msg := fmt.Sprintf("%s not found (%v): install Debian's prometheus package (apt-get install prometheus), as .ci/run does", name, err)
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// Target is one /metrics endpoint to scrape.
type Target struct {
	// Addr is host:port; Prometheus scrapes http://Addr/metrics.
	Addr string
	// Labels are the target's labels; "job" names its job (default
	// "rollplan"), as a Kubernetes service discovery would name it after
	// the Service.
	Labels map[string]string
}

// Config is what the server scrapes and evaluates.
type Config struct {
	Targets []Target
	// Discovered are jobs whose targets the test sets while the server
	// runs (Server.SetTargets, or a writer of Server.TargetsFile), through
	// file-based service discovery, as a Kubernetes service discovery
	// follows pods.
	Discovered []string
	// RuleFiles are Prometheus rule files (alerting and recording rules)
	// to load.
	RuleFiles []string
	// Host is the address to listen on; default 127.0.0.1. A test whose
	// pods query the server gives the host's address they reach.
	Host string
}

// Interval is the scrape and rule-evaluation interval.
const Interval = time.Second

// Server is a running Prometheus.
type Server struct {
	// URL is the server's base URL (http://HOST:PORT).
	URL  string
	log  *syncBuffer
	stop func() error
	done chan struct{}
	sd   string // folder of the Discovered jobs' target files
	jobs []string
}

// Start starts Prometheus on a free loopback port and waits until it is
// ready; the test's cleanup stops it and removes its data.
func Start(t testing.TB, c Config) *Server {
	t.Helper()
	bin := Binary(t, "prometheus")
	s, err := Run(bin, c, RunOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.Stop()
		if t.Failed() {
			t.Logf("prometheus log:\n%s", s.log.String())
		}
	})
	return s
}

// RunOptions say where a Prometheus that Run starts keeps its state.
type RunOptions struct {
	// Dir holds prometheus.yml, the Discovered jobs' target files (sd/)
	// and the data (data/); created if missing.
	Dir string
	// Log, when set, receives Prometheus's output too.
	Log io.Writer
}

// Run starts the prometheus binary bin on a free port of c.Host with c
// and waits (30 s at most) until it is ready: Start's work, for a program
// that is not a test (make dev-cluster). The process has a process group
// of its own, so a terminal's Ctrl-C reaches only its parent, which stops
// it (Stop); it is killed if its parent dies.
func Run(bin string, c Config, o RunOptions) (*Server, error) {
	// Absolute: prometheus.yml's paths are read relative to its folder.
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, fmt.Errorf("prometheus: %w", err)
	}
	o.Dir = dir
	s := &Server{log: &syncBuffer{}, done: make(chan struct{}), sd: filepath.Join(o.Dir, "sd"), jobs: c.Discovered}
	if err := os.MkdirAll(s.sd, 0o755); err != nil {
		return nil, fmt.Errorf("prometheus: %w", err)
	}
	// Each discovered job starts with no targets.
	for _, job := range c.Discovered {
		if err := s.SetTargets(job, nil); err != nil {
			return nil, err
		}
	}
	cfg, err := config(c, s.sd)
	if err != nil {
		return nil, err
	}
	cfgFile := filepath.Join(o.Dir, "prometheus.yml")
	if err := os.WriteFile(cfgFile, cfg, 0o644); err != nil {
		return nil, fmt.Errorf("prometheus: %w", err)
	}
	host := c.Host
	if host == "" {
		host = "127.0.0.1"
	}
	addr, err := freeAddr(host)
	if err != nil {
		return nil, fmt.Errorf("prometheus: %w", err)
	}
	s.URL = "http://" + addr
	cmd := exec.Command(bin, "--config.file="+cfgFile, "--storage.tsdb.path="+filepath.Join(o.Dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	var out io.Writer = s.log
	if o.Log != nil {
		out = io.MultiWriter(s.log, o.Log)
	}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start prometheus: %w", err)
	}
	go func() { _ = cmd.Wait(); close(s.done) }()
	var once sync.Once
	var stopErr error
	s.stop = func() error {
		once.Do(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-s.done:
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				<-s.done
				stopErr = errors.New("prometheus did not exit within 10s of SIGTERM: killed")
			}
		})
		return stopErr
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-s.done:
			return nil, fmt.Errorf("prometheus exited: %v\n%s", cmd.ProcessState, s.log.String())
		default:
		}
		if resp, err := http.Get(s.URL + "/-/ready"); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		if time.Now().After(deadline) {
			_ = s.stop()
			return nil, fmt.Errorf("prometheus not ready after 30s\n%s", s.log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Stop stops the server (a test of what its users do without it); the
// test's cleanup stops it otherwise. Stopping twice is stopping once.
func (s *Server) Stop() error { return s.stop() }

// Done is closed once the process has exited.
func (s *Server) Done() <-chan struct{} { return s.done }

// TargetsFile is the file_sd file of a Discovered job, for a writer that
// keeps it itself rather than through SetTargets (test/kubelet's
// Metrics.TargetsFile): JSON target groups, replaced whole (a rename), as
// SetTargets does. "" for a job that is not discovered.
func (s *Server) TargetsFile(job string) string {
	if !slices.Contains(s.jobs, job) {
		return ""
	}
	return filepath.Join(s.sd, job+".json")
}

// SetTargets replaces the targets of a Discovered job. Prometheus sees
// the file change within a second or so (it watches it); the file is
// replaced whole, so it never reads half of one.
func (s *Server) SetTargets(job string, targets []Target) error {
	if !slices.Contains(s.jobs, job) {
		return fmt.Errorf("prometheus: job %q is not discovered (Config.Discovered: %v)", job, s.jobs)
	}
	groups := make([]staticConfig, 0, len(targets))
	for _, tg := range targets {
		if tg.Addr == "" {
			return errors.New("prometheus: a target without an address")
		}
		groups = append(groups, staticConfig{Targets: []string{tg.Addr}, Labels: tg.Labels})
	}
	b, err := json.Marshal(groups)
	if err != nil {
		return err
	}
	tmp := filepath.Join(s.sd, "."+job+".json.tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("prometheus: targets of %s: %w", job, err)
	}
	if err := os.Rename(tmp, filepath.Join(s.sd, job+".json")); err != nil {
		return fmt.Errorf("prometheus: targets of %s: %w", job, err)
	}
	return nil
}

// staticConfig is a target group, in prometheus.yml and in file_sd files.
type staticConfig struct {
	Targets []string          `json:"targets"`
	Labels  map[string]string `json:"labels,omitempty"`
}

// config is the prometheus.yml of c: one scrape job per job label, and
// one per discovered job reading sd/JOB.json.
func config(c Config, sd string) ([]byte, error) {
	type fileSDConfig struct {
		Files           []string `json:"files"`
		RefreshInterval string   `json:"refresh_interval"`
	}
	type scrapeConfig struct {
		JobName       string         `json:"job_name"`
		StaticConfigs []staticConfig `json:"static_configs,omitempty"`
		FileSDConfigs []fileSDConfig `json:"file_sd_configs,omitempty"`
	}
	jobs := map[string]*scrapeConfig{}
	for _, tg := range c.Targets {
		if tg.Addr == "" {
			return nil, errors.New("prometheus: a target without an address")
		}
		job := tg.Labels["job"]
		if job == "" {
			job = "rollplan"
		}
		labels := map[string]string{}
		for k, v := range tg.Labels {
			if k != "job" {
				labels[k] = v
			}
		}
		if jobs[job] == nil {
			jobs[job] = &scrapeConfig{JobName: job}
		}
		jobs[job].StaticConfigs = append(jobs[job].StaticConfigs, staticConfig{Targets: []string{tg.Addr}, Labels: labels})
	}
	for _, job := range c.Discovered {
		if jobs[job] != nil {
			return nil, fmt.Errorf("prometheus: job %s both static and discovered", job)
		}
		jobs[job] = &scrapeConfig{JobName: job, FileSDConfigs: []fileSDConfig{{
			Files: []string{filepath.Join(sd, job+".json")}, RefreshInterval: Interval.String(),
		}}}
	}
	var scrape []*scrapeConfig
	for _, name := range slices.Sorted(maps.Keys(jobs)) {
		scrape = append(scrape, jobs[name])
	}
	rules := make([]string, len(c.RuleFiles))
	for i, f := range c.RuleFiles {
		abs, err := filepath.Abs(f)
		if err != nil {
			return nil, err
		}
		rules[i] = abs
	}
	return yaml.Marshal(map[string]any{
		"global": map[string]any{
			"scrape_interval":     Interval.String(),
			"scrape_timeout":      Interval.String(),
			"evaluation_interval": Interval.String(),
		},
		"rule_files":     rules,
		"scrape_configs": scrape,
	})
}

func freeAddr(host string) (string, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// Sample is one element of a query's result.
type Sample struct {
	Labels map[string]string
	Value  float64
}

func (s Sample) String() string {
	keys := make([]string, 0, len(s.Labels))
	for k := range s.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("{")
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s=%q", k, s.Labels[k])
	}
	fmt.Fprintf(&b, "} %g", s.Value)
	return b.String()
}

// Query evaluates a PromQL expression now (an instant query). A scalar
// result is one Sample without labels; an expression Prometheus cannot
// parse is an error that says why.
func (s *Server) Query(expr string) ([]Sample, error) {
	var data struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := s.get("/api/v1/query", url.Values{"query": {expr}}, &data); err != nil {
		return nil, fmt.Errorf("query %s: %w", expr, err)
	}
	switch data.ResultType {
	case "vector":
		var v []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		}
		if err := json.Unmarshal(data.Result, &v); err != nil {
			return nil, fmt.Errorf("query %s: %w", expr, err)
		}
		out := make([]Sample, 0, len(v))
		for _, e := range v {
			f, err := value(e.Value)
			if err != nil {
				return nil, fmt.Errorf("query %s: %w", expr, err)
			}
			out = append(out, Sample{Labels: e.Metric, Value: f})
		}
		return out, nil
	case "scalar":
		var v [2]any
		if err := json.Unmarshal(data.Result, &v); err != nil {
			return nil, fmt.Errorf("query %s: %w", expr, err)
		}
		f, err := value(v)
		if err != nil {
			return nil, fmt.Errorf("query %s: %w", expr, err)
		}
		return []Sample{{Value: f}}, nil
	default:
		return nil, fmt.Errorf("query %s: result type %s: want a vector or a scalar", expr, data.ResultType)
	}
}

// value reads a [time, "value"] pair.
func value(v [2]any) (float64, error) {
	s, ok := v[1].(string)
	if !ok {
		return 0, fmt.Errorf("value %v: not a string", v[1])
	}
	return strconv.ParseFloat(s, 64)
}

// Wait queries expr until its result is not empty, and returns it; after
// timeout it returns the last error, or says it stayed empty.
func (s *Server) Wait(expr string, timeout time.Duration) ([]Sample, error) {
	deadline := time.Now().Add(timeout)
	for {
		v, err := s.Query(expr)
		if err == nil && len(v) > 0 {
			return v, nil
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("query %s: empty for %s", expr, timeout)
			}
			return nil, err
		}
		time.Sleep(Interval / 2)
	}
}

// Alert is an alert of the loaded rules, pending or firing.
type Alert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	State       string            `json:"state"` // pending or firing
}

// Alerts lists the active alerts.
func (s *Server) Alerts() ([]Alert, error) {
	var data struct {
		Alerts []Alert `json:"alerts"`
	}
	if err := s.get("/api/v1/alerts", nil, &data); err != nil {
		return nil, fmt.Errorf("alerts: %w", err)
	}
	return data.Alerts, nil
}

// Rule is a loaded rule and how its last evaluation went.
type Rule struct {
	Name      string `json:"name"`
	Query     string `json:"query"`
	Type      string `json:"type"`   // alerting or recording
	Health    string `json:"health"` // ok, err or unknown (not evaluated yet)
	LastError string `json:"lastError"`
}

// Rules lists the loaded rules of every group.
func (s *Server) Rules() ([]Rule, error) {
	var data struct {
		Groups []struct {
			Rules []Rule `json:"rules"`
		} `json:"groups"`
	}
	if err := s.get("/api/v1/rules", nil, &data); err != nil {
		return nil, fmt.Errorf("rules: %w", err)
	}
	var out []Rule
	for _, g := range data.Groups {
		out = append(out, g.Rules...)
	}
	return out, nil
}

// get calls the HTTP API and decodes its data into data.
func (s *Server) get(path string, q url.Values, data any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	u := s.URL + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	var r struct {
		Status    string          `json:"status"`
		ErrorType string          `json:"errorType"`
		Error     string          `json:"error"`
		Data      json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return fmt.Errorf("HTTP %d: %w: %s", resp.StatusCode, err, bytes.TrimSpace(body))
	}
	if r.Status != "success" {
		return fmt.Errorf("%s: %s", r.ErrorType, r.Error)
	}
	return json.Unmarshal(r.Data, data)
}

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// InstantQueries is how many instant queries (/api/v1/query) the server
// has answered, from its own /metrics: the load a test put on it.
func (s *Server) InstantQueries(t testing.TB) int {
	t.Helper()
	resp, err := http.Get(s.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "prometheus_http_requests_total{") && strings.Contains(l, `handler="/api/v1/query"`) {
			f := strings.Fields(l)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err != nil {
				t.Fatalf("prometheus /metrics: %s: %v", l, err)
			}
			n += int(v)
		}
	}
	return n
}
