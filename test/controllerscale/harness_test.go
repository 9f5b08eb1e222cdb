package controllerscale

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/rollplan/rollplan/test/controlplane"
	"github.com/rollplan/rollplan/test/harness"
)

// proc is a process whose CPU time and memory the test reads from /proc.
type proc struct{ pid int }

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat:
// 100 on every Linux architecture Go supports.
const clockTicks = 100

// cpu is the process's user+system CPU time so far.
func (p proc) cpu() (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.pid))
	if err != nil {
		return 0, fmt.Errorf("CPU time of process %d: %w", p.pid, err)
	}
	// The command (field 2) may hold spaces: count fields after its ')'.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("CPU time of process %d: short /proc stat %q", p.pid, s)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("CPU time of process %d: /proc stat %q", p.pid, s)
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}

// memory reads a VmXXX line (kB) of /proc/PID/status: VmHWM is the peak
// resident set, VmRSS the current one.
func (p proc) memory(field string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", p.pid))
	if err != nil {
		return 0, fmt.Errorf("memory of process %d: %w", p.pid, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("memory of process %d: %s %q", p.pid, field, v)
			}
			return kb * 1024, nil
		}
	}
	return 0, fmt.Errorf("memory of process %d: no %s in /proc/%d/status", p.pid, field, p.pid)
}

// controllerManager finds the control plane's kube-controller-manager (its
// command line names the plane's kubeconfig) and its secure port, whose
// /metrics has client-go's rest_client_requests_total.
func controllerManager(cp *controlplane.ControlPlane) (proc, string, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return proc{}, "", err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if filepath.Base(args[0]) != "kube-controller-manager" || !strings.Contains(string(b), "--kubeconfig="+cp.Kubeconfig+"\x00") {
			continue
		}
		for _, a := range args {
			if port, ok := strings.CutPrefix(a, "--secure-port="); ok {
				return proc{pid}, "https://127.0.0.1:" + port + "/metrics", nil
			}
		}
	}
	return proc{}, "", fmt.Errorf("no kube-controller-manager with --kubeconfig=%s among the processes", cp.Kubeconfig)
}

// metrics scrapes a Prometheus text endpoint.
type metrics struct {
	url    string
	token  string
	client *http.Client
}

// kcmMetrics reads kube-controller-manager's /metrics with the token of a
// service account allowed to (kcm authenticates it by TokenReview and
// authorises it by SubjectAccessReview, as it would Prometheus).
func kcmMetrics(ctx context.Context, c kubernetes.Interface, ns, url string) (metrics, error) {
	const name = "metrics-reader"
	if _, err := c.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		return metrics{}, fmt.Errorf("service account %s/%s: %w", ns, name, err)
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}}
	if _, err := c.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		return metrics{}, fmt.Errorf("cluster role %s: %w", name, err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}}}
	if _, err := c.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		return metrics{}, fmt.Errorf("cluster role binding %s: %w", name, err)
	}
	tok, err := c.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		return metrics{}, fmt.Errorf("token of service account %s/%s: %w", ns, name, err)
	}
	return metrics{url: url, token: tok.Status.Token, client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		// kcm's serving certificate is self-signed, made at its start.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback scrape of a test process
	}}}, nil
}

// counter sums the samples of a counter by the values of one label ("" the
// total).
func (m metrics) counter(name, by string) (map[string]float64, error) {
	req, err := http.NewRequest(http.MethodGet, m.url, nil)
	if err != nil {
		return nil, err
	}
	if m.token != "" {
		req.Header.Set("Authorization", "Bearer "+m.token)
	}
	resp, err := m.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", m.url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: %s %v: %.300s", m.url, resp.Status, err, body)
	}
	out := map[string]float64{}
	found := false
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("scrape %s: %q: %w", m.url, line, err)
		}
		found = true
		key := ""
		if by != "" {
			if _, rest, ok := strings.Cut(line[:i], by+`="`); ok {
				key, _, _ = strings.Cut(rest, `"`)
			}
		}
		out[key] += v
		out["total"] += v
	}
	if !found {
		return nil, fmt.Errorf("scrape %s: no %s", m.url, name)
	}
	return out, nil
}

// workload is what the tracker knows of one workload: its pods (label
// app=NAME), how many it should have, and its budget of unavailable pods.
type workload struct {
	kind, name string
	desired    int
	budget     int
	pods       map[types.UID]*corev1.Pod
	worst      int
	worstAt    string
	// patched: the generation the test's last patch gave the workload.
	patched int64
}

// tracker watches every pod of the namespace and records, per workload,
// the most pods unavailable at once: desired minus the pods not
// terminating, Ready, and running the image their spec names (an in-place
// update the kubelet has not acted on is not available).
type tracker struct {
	mu        sync.Mutex
	workloads map[string]*workload
	armed     bool
	events    int
}

func newTracker(ctx context.Context, t *testing.T, c kubernetes.Interface, ns string, ws []*workload) *tracker {
	tr := &tracker{workloads: map[string]*workload{}}
	for _, w := range ws {
		w.pods = map[types.UID]*corev1.Pod{}
		tr.workloads[w.name] = w
	}
	f := informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithNamespace(ns))
	inf := f.Core().V1().Pods().Informer()
	set := func(obj any, gone bool) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		tr.mu.Lock()
		defer tr.mu.Unlock()
		w := tr.workloads[p.Labels["app"]]
		if w == nil {
			return
		}
		if gone {
			delete(w.pods, p.UID)
		} else {
			w.pods[p.UID] = p
		}
		tr.events++
		tr.record(w)
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { set(obj, false) },
		UpdateFunc: func(_, obj any) { set(obj, false) },
		DeleteFunc: func(obj any) { set(obj, true) },
	})
	stop := make(chan struct{})
	f.Start(stop)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("pod tracker: cache did not sync")
	}
	t.Cleanup(func() { close(stop); f.Shutdown() })
	return tr
}

// record updates w's worst unavailability; called with mu held.
func (tr *tracker) record(w *workload) {
	if !tr.armed {
		return
	}
	n := 0
	for _, p := range w.pods {
		if harness.Available(p) {
			n++
		}
	}
	if w.desired-n > w.worst {
		w.worst = w.desired - n
		var desc []string
		for _, p := range w.pods {
			desc = append(desc, fmt.Sprintf("%s(available=%t terminating=%t image=%s)", p.Name, harness.Available(p), p.DeletionTimestamp != nil, p.Spec.Containers[0].Image))
		}
		sort.Strings(desc)
		w.worstAt = strings.Join(desc, " ")
	}
}

// arm starts a measured phase: worst unavailability from zero.
func (tr *tracker) arm() {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.armed = true
	for _, w := range tr.workloads {
		w.worst, w.worstAt = 0, ""
		tr.record(w)
	}
}

// rolled: how many workloads have exactly their desired pods, every one
// available and running image, and no other pod (a terminating old one).
func (tr *tracker) rolled(image string) (done int, behind []string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, w := range tr.workloads {
		ok, n := true, 0
		for _, p := range w.pods {
			if p.Spec.Containers[0].Image != image {
				ok = false
				break
			}
			if harness.Available(p) {
				n++
			}
		}
		if ok && n == w.desired && len(w.pods) == w.desired {
			done++
		} else {
			behind = append(behind, fmt.Sprintf("%s %s: %d/%d pods of %d available on %s", w.kind, w.name, n, w.desired, len(w.pods), image))
		}
	}
	sort.Strings(behind)
	return done, behind
}

// uids: every pod's UID, by workload.
func (tr *tracker) uids() map[types.UID]string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	out := map[types.UID]string{}
	for _, w := range tr.workloads {
		for uid := range w.pods {
			out[uid] = w.name
		}
	}
	return out
}

// over lists the workloads whose worst unavailability passed their budget,
// and returns the worst seen over all.
func (tr *tracker) over() (worst int, over []string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, w := range tr.workloads {
		worst = max(worst, w.worst)
		if w.worst > w.budget {
			over = append(over, fmt.Sprintf("%s %s: %d pods unavailable at once, budget %d: %s", w.kind, w.name, w.worst, w.budget, w.worstAt))
		}
	}
	sort.Strings(over)
	return worst, over
}

// startController runs `rollplan controller` against the plane, its log in
// dir; stop it with the returned function (SIGTERM, then its exit).
func startController(t *testing.T, bin string, cp *controlplane.ControlPlane, args []string, logPath string) (*exec.Cmd, func() error) {
	t.Helper()
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append([]string{"controller", "--kubeconfig", cp.Kubeconfig}, args...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Dies with the test binary even when a timeout panic skips cleanups.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start rollplan controller: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait(); logf.Close() }()
	var once sync.Once
	var stopErr error
	stop := func() error {
		once.Do(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case stopErr = <-done:
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				stopErr = fmt.Errorf("rollplan controller did not exit within 30s of SIGTERM: %v", <-done)
			}
		})
		return stopErr
	}
	t.Cleanup(func() { _ = stop() })
	return cmd, stop
}

// tail is the end of a log file, for a failure message.
func tail(path string, lines int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	l := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}

// createNamespace creates ns.
func createNamespace(ctx context.Context, t *testing.T, c kubernetes.Interface, ns string) {
	t.Helper()
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", ns, err)
	}
}
