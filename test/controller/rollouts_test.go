package controller

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/test/kubelet"
)

// zonesPolicy is the example policy the tests name "zones".
func zonesPolicy(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs("../../policies/examples/one-zone-at-a-time")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// fleet is a set of workloads of all three kinds, created and rolled out
// (the controller reports each Complete) before the test changes them.
type fleet struct {
	ws     []workload
	change map[string]func(*corev1.PodSpec)
	// image and mode: what each workload's pods run after the change.
	image, mode map[string]string
	before      map[string]map[string]string
}

// tenWorkloads creates ten managed workloads (51 pods on 6 nodes) and their
// template changes: image changes that go in place, env changes and a
// Recreate policy that recreate, a DaemonSet under the named policy
// "zones" (one zone at a time).
func (e *env) tenWorkloads(image string) *fleet {
	e.t.Helper()
	n := e.nodes
	f := &fleet{change: map[string]func(*corev1.PodSpec){}, image: map[string]string{}, mode: map[string]string{}}
	add := func(obj any, w workload, envChange bool) {
		e.create(obj)
		f.ws = append(f.ws, w)
		if envChange {
			f.change[w.Name], f.image[w.Name], f.mode[w.Name] = setEnv("b"), "example.com/app:v1", "b"
		} else {
			f.change[w.Name], f.image[w.Name], f.mode[w.Name] = setImage(image), image, "a"
		}
	}
	// The zonal DaemonSet's pods take long to become Ready, so that two
	// are in flight at once: in one zone under the policy "zones", in two
	// under the default order (by node, the zones taking turns).
	zonalImage := image + "-zonal"
	e.kubelet.SetImage(zonalImage, kubelet.Behavior{StartDelay: 200 * time.Millisecond, ReadyDelay: 2 * time.Second})
	add(statefulSet(e.ns, "web", 6, "2"), wl("StatefulSet", "web", 6, 2, true), false)
	add(statefulSet(e.ns, "db", 5, "1"), wl("StatefulSet", "db", 5, 1, false), true)
	add(statefulSet(e.ns, "cache", 4, "50%"), wl("StatefulSet", "cache", 4, 2, true), false)
	queue := statefulSet(e.ns, "queue", 3, "1")
	queue.Annotations[facts.AnnPodUpdatePolicy] = "Recreate"
	add(queue, wl("StatefulSet", "queue", 3, 1, false), false)
	add(daemonSet(e.ns, "agent", ""), wl("DaemonSet", "agent", n, 1, true), false)
	add(daemonSet(e.ns, "logs", "2"), wl("DaemonSet", "logs", n, 2, false), true)
	zonal := daemonSet(e.ns, "zonal", "2")
	zonal.Annotations[facts.AnnPolicy] = "zones"
	add(zonal, wl("DaemonSet", "zonal", n, 2, true), false)
	f.change["zonal"], f.image["zonal"] = setImage(zonalImage), zonalImage
	add(deployment(e.ns, "api", 6, "2"), wl("Deployment", "api", 6, 2, true), false)
	add(deployment(e.ns, "front", 4, "1"), wl("Deployment", "front", 4, 1, false), true)
	add(deployment(e.ns, "worker", 5, "1"), wl("Deployment", "worker", 5, 1, true), false)
	// The controller holds the managed Deployments (spec.paused) and
	// records every rollout Complete before anything changes.
	e.waitRolledOut(f.ws, 90*time.Second)
	f.before = map[string]map[string]string{}
	for _, w := range f.ws {
		f.before[w.Name] = e.uids(w.Name)
	}
	return f
}

// follow makes the watcher record every workload of the fleet, the zonal
// DaemonSet by zone too.
func (f *fleet) follow(e *env, w *watcher) {
	for _, wl := range f.ws {
		w.follow(wl)
	}
	zoneOf, perZone := map[string]string{}, map[string]int{}
	for i := range e.nodes {
		zone := fmt.Sprintf("zone-%d", i%3)
		zoneOf[fmt.Sprintf("%s-node-%d", e.ns, i)] = zone
		perZone[zone]++
	}
	w.groupBy("zonal", func(p *corev1.Pod) string { return zoneOf[p.Spec.NodeName] }, perZone)
}

func (f *fleet) changeAll(e *env) time.Time {
	start := time.Now()
	for _, w := range f.ws {
		e.setTemplate(w.Kind, w.Name, f.change[w.Name])
	}
	return start
}

// check: every pod at the new template, in place where expected, the
// budgets held, no pod updated twice; the zonal DaemonSet one zone at a
// time. It logs each workload's most unavailable.
func (f *fleet) check(e *env, w *watcher, since time.Time) {
	e.t.Helper()
	var worst []string
	for _, wl := range f.ws {
		e.checkPods(wl, f.before[wl.Name], f.image[wl.Name], f.mode[wl.Name])
		worst = append(worst, fmt.Sprintf("%s=%d/%d", wl.Name, w.check(e, wl.Name, since, 1), wl.Budget))
	}
	e.logf("most pods unavailable at once (of budget): %s", strings.Join(worst, " "))
	w.mu.Lock()
	defer w.mu.Unlock()
	if g := w.track["zonal"].worstGroups; g != 1 {
		e.t.Errorf("daemonset/zonal (policy zones, one zone at a time): %d zones had pods unavailable at once, want 1: %s", g, w.track["zonal"].groupsAt)
	}
	if n := w.track["zonal"].worst; n < 2 {
		e.t.Errorf("daemonset/zonal: at most %d pod unavailable at once: the zone, not one pod at a time, should bound the rollout", n)
	}
}

// TestTenRollouts: two controller processes elect a leader; ten managed
// workloads of all three kinds get new templates; the leader rolls them
// all to completion by itself: every pod at the new template and
// available, the in-place ones with their UIDs, the others recreated once,
// never more pods unavailable than each workload's budget, no pod updated
// twice, and the DaemonSet annotated with the named policy "zones" rolled
// one zone at a time. The standby never drives anything.
func TestTenRollouts(t *testing.T) {
	e := newEnv(t, "ten", 6, 4*time.Minute)
	leases := e.watchLeases()
	a := e.startController("ctrl-a", "--named-policy", "zones="+zonesPolicy(t))
	b := e.startController("ctrl-b", "--named-policy", "zones="+zonesPolicy(t))
	leader := e.waitLeader(leases, []*replica{a, b}, "", 15*time.Second)
	standby := a
	if leader == a {
		standby = b
	}
	e.logf("leader %s, standby %s", leader.identity, standby.identity)

	const image = "example.com/app:v2"
	e.kubelet.SetImage(image, kubelet.Behavior{StartDelay: 200 * time.Millisecond, ReadyDelay: 600 * time.Millisecond})
	f := e.tenWorkloads(image)
	w := e.watchPods()
	f.follow(e, w)
	since := f.changeAll(e)
	took := e.waitRolledOut(f.ws, 2*time.Minute)
	e.logf("FIGURE: 10 rollouts (51 pods) complete %.1fs after the template changes", took.Seconds())
	f.check(e, w, since)

	// Only the leader drove: the standby took no driver Lease.
	if c, ok := leases.firstAfter(time.Time{}, func(c leaseChange) bool { return c.holder == controllerHolder(standby) }); ok {
		e.t.Errorf("the standby %s took driver Lease %s", standby.identity, c.lease)
	}
	if _, ok := leases.firstAfter(time.Time{}, func(c leaseChange) bool { return c.holder == controllerHolder(leader) }); !ok {
		e.t.Errorf("the leader %s never took a driver Lease", leader.identity)
	}
	// Once complete, the controller lets go of every workload, and leaves
	// them alone: no write moves a generation (a Deployment's moves with
	// its annotations, the rollout state's among them) and no Lease
	// changes hands.
	e.waitLeasesFree(f.ws, 10*time.Second)
	gens := map[string]int64{}
	for _, wl := range f.ws {
		m, _, err := e.object(wl.Kind, wl.Name)
		if err != nil {
			t.Fatal(err)
		}
		gens[wl.ref()] = m.GetGeneration()
	}
	quiet := time.Now()
	time.Sleep(2 * time.Second)
	for _, wl := range f.ws {
		m, _, err := e.object(wl.Kind, wl.Name)
		if err != nil {
			t.Fatal(err)
		}
		if g := m.GetGeneration(); g != gens[wl.ref()] {
			t.Errorf("%s: generation moved from %d to %d after the rollout completed: something keeps writing it", wl.ref(), gens[wl.ref()], g)
		}
	}
	if c, ok := leases.firstAfter(quiet, func(c leaseChange) bool { return c.lease == e.sysNS+"/"+leaseName }); ok {
		t.Errorf("the leader-election Lease changed hands (%q -> %q) with nothing killed", c.from, c.holder)
	}
}

// waitLeasesFree waits until no one holds the workloads' driver Leases.
func (e *env) waitLeasesFree(ws []workload, timeout time.Duration) {
	e.t.Helper()
	held := map[string]string{}
	err := wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		clear(held)
		for _, wl := range ws {
			if h := e.driverHolder(wl.Kind, wl.Name); h != "" {
				held[wl.ref()] = h
			}
		}
		return len(held) == 0, nil
	})
	if err != nil {
		e.t.Errorf("driver Leases still held %s after the rollouts completed: %v", timeout, held)
	}
}

// TestLeaderKilled: the active replica is SIGKILLed mid-rollout, twice
// (the killed one restarted as a standby in between): each time the other
// takes over within the lease duration (plus slack), the rollouts go on
// from where they were and complete, no budget is ever exceeded, and no
// pod is updated twice.
func TestLeaderKilled(t *testing.T) {
	e := newEnv(t, "kill", 6, 4*time.Minute)
	leases := e.watchLeases()
	replicas := []*replica{e.startController("ctrl-a"), e.startController("ctrl-b")}
	leader := e.waitLeader(leases, replicas, "", 15*time.Second)

	// Slow pods, budget 1: each rollout takes many steps, so both kills
	// land inside it.
	const image = "example.com/app:v3"
	e.kubelet.SetImage(image, kubelet.Behavior{StartDelay: 300 * time.Millisecond, ReadyDelay: 1500 * time.Millisecond})
	ws := []workload{
		wl("StatefulSet", "slow", 8, 1, true),
		wl("StatefulSet", "wide", 6, 2, true),
		wl("StatefulSet", "fresh", 4, 1, false),
		wl("DaemonSet", "agent", 6, 1, true),
		wl("Deployment", "api", 6, 1, true),
	}
	e.create(statefulSet(e.ns, "slow", 8, "1"))
	e.create(statefulSet(e.ns, "wide", 6, "2"))
	e.create(statefulSet(e.ns, "fresh", 4, "1"))
	e.create(daemonSet(e.ns, "agent", ""))
	e.create(deployment(e.ns, "api", 6, "1"))
	e.waitRolledOut(ws, 90*time.Second)
	before := map[string]map[string]string{}
	for _, w := range ws {
		before[w.Name] = e.uids(w.Name)
	}
	w := e.watchPods()
	for _, wl := range ws {
		w.follow(wl)
	}
	since := time.Now()
	for _, wl := range ws {
		if wl.InPlace {
			e.setTemplate(wl.Kind, wl.Name, setImage(image))
		} else {
			e.setTemplate(wl.Kind, wl.Name, setEnv("b"))
		}
	}

	var handovers []time.Duration
	for kill := 1; kill <= 2; kill++ {
		// Kill once the leader has made progress since it took over.
		progress := e.updatedPods("slow", image)
		e.waitUpdated("slow", image, progress+1, 30*time.Second)
		if ok, _ := e.rolledOut(ws[0]); ok {
			t.Fatalf("kill %d: statefulset/slow is already rolled out: the kill would not land mid-rollout", kill)
		}
		old := leader
		killedAt := time.Now()
		old.kill()
		e.logf("kill %d: SIGKILLed leader %s with %d of 8 pods of statefulset/slow updated", kill, old.identity, e.updatedPods("slow", image))
		var others []*replica
		for _, r := range replicas {
			if r != old {
				others = append(others, r)
			}
		}
		leader = e.waitLeader(leases, others, old.identity, leaseDuration+10*time.Second)
		c, _ := leases.firstAfter(killedAt, func(c leaseChange) bool { return c.lease == e.sysNS+"/"+leaseName && c.holder == leader.identity })
		handover := c.at.Sub(killedAt)
		handovers = append(handovers, handover)
		first, ok := leases.firstAfter(killedAt, func(c leaseChange) bool { return c.holder == controllerHolder(leader) })
		if !ok {
			// Give it the time of a step to take a workload.
			err := wait.PollUntilContextTimeout(e.ctx, 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
				first, ok = leases.firstAfter(killedAt, func(c leaseChange) bool { return c.holder == controllerHolder(leader) })
				return ok, nil
			})
			if err != nil {
				t.Fatalf("kill %d: the new leader %s took no driver Lease", kill, leader.identity)
			}
		}
		e.logf("FIGURE: kill %d: handover %.2fs (leader Lease to %s), first driver Lease (%s) taken %.2fs after the kill",
			kill, handover.Seconds(), leader.identity, first.lease, first.at.Sub(killedAt).Seconds())
		// client-go's elector: the standby notes the last renewal it saw
		// (reading every retry period, jittered up to 1.2x) and takes over
		// at its first try once the lease duration has passed since:
		// within the lease duration plus two retry periods, plus the API
		// server's latency on a busy machine.
		if handover > leaseDuration+3*time.Second {
			t.Errorf("kill %d: handover took %s, want within the lease duration %s (+3s slack)", kill, handover, leaseDuration)
		}
		// The killed replica comes back as a standby (its Deployment
		// would restart it), under a new identity.
		replicas = append(others, e.startController(old.name))
	}
	took := e.waitRolledOut(ws, 2*time.Minute)
	e.logf("rollouts complete %.1fs after the second handover; %.1fs after the template changes", took.Seconds(), time.Since(since).Seconds())
	for _, wl := range ws {
		img, mode := image, "a"
		if !wl.InPlace {
			img, mode = "example.com/app:v1", "b"
		}
		e.checkPods(wl, before[wl.Name], img, mode)
		w.check(e, wl.Name, since, 1)
	}
	t.Logf("handovers: %v", handovers)
}

// updatedPods counts the workload's pods whose spec names image.
func (e *env) updatedPods(name, image string) int {
	e.t.Helper()
	n := 0
	for _, p := range e.pods("app=" + name) {
		if p.Spec.Containers[0].Image == image {
			n++
		}
	}
	return n
}

// waitUpdated waits until at least n pods of the workload name image.
func (e *env) waitUpdated(name, image string, n int, timeout time.Duration) {
	e.t.Helper()
	err := wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return e.updatedPods(name, image) >= n, nil
	})
	if err != nil {
		e.t.Fatalf("%s: fewer than %d pods at %s: %v", name, n, image, err)
	}
}
