package controller

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/rollplan/rollplan/executor"
	"github.com/rollplan/rollplan/test/harness"
)

// Leader election as the tests run it: short, so a handover takes seconds.
const (
	leaseDuration = 4 * time.Second
	renewDeadline = 3 * time.Second
	retryPeriod   = 500 * time.Millisecond
	// leaseName: the controller's default leader-election Lease.
	leaseName = "rollplan-controller"
)

// replica is one `rollplan controller` process.
type replica struct {
	// name: its POD_NAME, which starts its identity.
	name string
	cmd  *exec.Cmd
	log  *harness.SyncBuffer
	done chan struct{}
	// identity: as the process logged it (POD_NAME_random).
	identity string
	readyz   string
}

// startController starts a controller process scoped to the test's
// namespace, with its leader-election Lease in ns-system, and waits until
// it has synced its caches and answers /readyz. extra: more flags.
func (e *env) startController(name string, extra ...string) *replica {
	e.t.Helper()
	cp := harness.Cluster(e.t)
	args := append([]string{"controller", "--kubeconfig", cp.Kubeconfig, "-n", e.ns,
		"--leader-elect-resource-namespace", e.sysNS,
		"--leader-elect-lease-duration", leaseDuration.String(),
		"--leader-elect-renew-deadline", renewDeadline.String(),
		"--leader-elect-retry-period", retryPeriod.String(),
		"--health-probe-bind-address", "127.0.0.1:0", "--metrics-bind-address", "127.0.0.1:0",
	}, extra...)
	cmd := exec.Command(harness.RollplanBinary(e.t), args...)
	cmd.Env = append(cmd.Environ(), "POD_NAME="+name)
	r := &replica{name: name, cmd: cmd, log: &harness.SyncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = r.log, r.log
	// Killed with the test binary, whatever ends it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		e.t.Fatalf("start controller %s: %v", name, err)
	}
	go func() { _ = cmd.Wait(); close(r.done) }()
	e.t.Cleanup(func() {
		r.stop()
		if e.t.Failed() {
			e.t.Logf("controller %s (%s) log:\n%s", r.name, r.identity, r.log.String())
		}
	})
	err := wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		select {
		case <-r.done:
			return false, fmt.Errorf("exited: %v", cmd.ProcessState)
		default:
		}
		for _, l := range harness.LogLines(r.log.String()) {
			switch l["msg"] {
			case "starting":
				r.identity, _ = l["identity"].(string)
			case "serving health probes":
				r.readyz, _ = l["address"].(string)
			}
		}
		if r.identity == "" || r.readyz == "" {
			return false, nil
		}
		resp, err := http.Get(r.readyz)
		if err != nil {
			return false, nil
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		e.t.Fatalf("controller %s not ready: %v\n%s", name, err, r.log.String())
	}
	if !strings.HasPrefix(r.identity, name+"_") {
		e.t.Fatalf("controller %s: identity %q does not start with its POD_NAME", name, r.identity)
	}
	return r
}

// kill sends SIGKILL and waits until the process is gone.
func (r *replica) kill() {
	_ = r.cmd.Process.Signal(syscall.SIGKILL)
	<-r.done
}

// stop ends the process as its Deployment would (SIGTERM), then kills it.
func (r *replica) stop() {
	select {
	case <-r.done:
		return
	default:
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(15 * time.Second):
		r.kill()
	}
}

// leaseLog records every holder change of the Leases of the test: the
// leader-election Lease and the workloads' driver Leases.
type leaseLog struct {
	mu      sync.Mutex
	changes []leaseChange
	holders map[string]string
}

type leaseChange struct {
	at           time.Time
	lease        string // NAMESPACE/NAME
	from, holder string
}

// watchLeases starts recording the Leases of both namespaces.
func (e *env) watchLeases() *leaseLog {
	e.t.Helper()
	l := &leaseLog{holders: map[string]string{}}
	stop := make(chan struct{})
	for _, ns := range []string{e.ns, e.sysNS} {
		f := informers.NewSharedInformerFactoryWithOptions(e.client, 0, informers.WithNamespace(ns))
		inf := f.Coordination().V1().Leases().Informer()
		set := func(obj any) {
			lease, ok := obj.(*coordinationv1.Lease)
			if !ok {
				return
			}
			holder := ""
			if lease.Spec.HolderIdentity != nil {
				holder = *lease.Spec.HolderIdentity
			}
			key := lease.Namespace + "/" + lease.Name
			l.mu.Lock()
			defer l.mu.Unlock()
			if prev, seen := l.holders[key]; !seen || prev != holder {
				l.changes = append(l.changes, leaseChange{at: time.Now(), lease: key, from: prev, holder: holder})
				l.holders[key] = holder
			}
		}
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: set, UpdateFunc: func(_, obj any) { set(obj) }})
		f.Start(stop)
		f.WaitForCacheSync(stop)
		e.t.Cleanup(f.Shutdown)
	}
	e.t.Cleanup(func() { close(stop) })
	return l
}

// leader is who holds the leader-election Lease now, as recorded.
func (l *leaseLog) leader(e *env) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.holders[e.sysNS+"/"+leaseName]
}

// firstAfter is the first change after t of a Lease for which match
// holds, and whether there is one.
func (l *leaseLog) firstAfter(t time.Time, match func(leaseChange) bool) (leaseChange, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.changes {
		if c.at.After(t) && match(c) {
			return c, true
		}
	}
	return leaseChange{}, false
}

// waitLeader waits until someone other than not holds the leader Lease and
// returns that replica.
func (e *env) waitLeader(l *leaseLog, replicas []*replica, not string, timeout time.Duration) *replica {
	e.t.Helper()
	var got *replica
	err := wait.PollUntilContextTimeout(e.ctx, 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		holder := l.leader(e)
		for _, r := range replicas {
			if holder == r.identity && holder != not {
				got = r
			}
		}
		return got != nil, nil
	})
	if err != nil {
		e.t.Fatalf("no new leader (holder %q): %v", l.leader(e), err)
	}
	return got
}

// driverHolder reads who holds the workload's driver Lease ("" nobody or
// no Lease).
func (e *env) driverHolder(kind, name string) string {
	e.t.Helper()
	l, err := e.client.CoordinationV1().Leases(e.ns).Get(e.ctx, "rollplan-"+strings.ToLower(kind)+"-"+name, metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// controllerHolder is the driver Lease holder identity of a replica.
func controllerHolder(r *replica) string { return executor.DriverController + " " + r.identity }
