package controller

import (
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/live"
	"github.com/rollplan/rollplan/test/kubelet"
)

// TestRolloverPauseHaltApply runs four rollouts at once under two
// controller replicas, each through one of the controller's promises:
//
//   - roll: the template changes again mid-rollout; the controller
//     re-targets the newest revision (no pod is updated to the middle one
//     once the state names the newest) and completes at it. Meanwhile
//     `rollplan apply` is refused (exit 1, naming the controller's
//     identity and the driver Lease), and `apply --wait-for-lease` waits
//     for the controller to let go, then finds the rollout done.
//     `rollplan status` shows the driver and the controller's record.
//   - pause: `rollplan pause` mid-rollout: the state says Paused and no new
//     pod is updated for 3 s; `rollplan resume` and it completes.
//   - strict: InPlaceOnly and an env change: Halted with the reason, a
//     Warning Event RolloutHalted, and it stays halted (no pod touched,
//     not stepped again, even once the annotation allows recreating)
//     until `rollplan resume`; then it recreates every pod.
//   - broken: the new image crash-loops: the default policy halts after
//     the first pod; a new template (a good image) ends the halt and the
//     rollout completes in place at it.
func TestRolloverPauseHaltApply(t *testing.T) {
	e := newEnv(t, "behave", 3, 4*time.Minute)
	leases := e.watchLeases()
	replicas := []*replica{e.startController("ctrl-a"), e.startController("ctrl-b")}
	leader := e.waitLeader(leases, replicas, "", 15*time.Second)

	const slow, slower, good, bad = "example.com/app:v2", "example.com/app:v2-slower", "example.com/app:v3", "example.com/app:broken"
	e.kubelet.SetImage(slow, kubelet.Behavior{StartDelay: 300 * time.Millisecond, ReadyDelay: 1500 * time.Millisecond})
	e.kubelet.SetImage(slower, kubelet.Behavior{StartDelay: 300 * time.Millisecond, ReadyDelay: 2500 * time.Millisecond})
	e.kubelet.SetImage(bad, kubelet.Behavior{CrashLoop: true, CrashInterval: 200 * time.Millisecond})
	roll := wl("StatefulSet", "roll", 6, 1, true)
	pause := wl("StatefulSet", "pause", 6, 1, true)
	strict := wl("StatefulSet", "strict", 3, 1, false)
	broken := wl("StatefulSet", "broken", 4, 1, true)
	broken.CrashLoops = true
	e.create(statefulSet(e.ns, roll.Name, 6, "1"))
	e.create(statefulSet(e.ns, pause.Name, 6, "1"))
	s := statefulSet(e.ns, strict.Name, 3, "1")
	s.Annotations[facts.AnnPodUpdatePolicy] = "InPlaceOnly"
	e.create(s)
	e.create(statefulSet(e.ns, broken.Name, 4, "1"))
	all := []workload{roll, pause, strict, broken}
	e.waitRolledOut(all, 90*time.Second)
	before := map[string]map[string]string{}
	for _, w := range all {
		before[w.Name] = e.uids(w.Name)
	}
	w := e.watchPods()
	for _, wl := range all {
		w.follow(wl)
	}
	since := time.Now()
	e.setTemplate("StatefulSet", pause.Name, setImage(slow))
	e.setTemplate("StatefulSet", strict.Name, setEnv("b"))
	e.setTemplate("StatefulSet", broken.Name, setImage(bad))

	t.Run("pause and resume", func(t *testing.T) {
		e.waitUpdated(pause.Name, slow, 1, 30*time.Second)
		e.mustCLI("pause", "statefulset/"+pause.Name)
		e.waitState("StatefulSet", pause.Name, "Paused", 15*time.Second, func(s *live.RolloutState, _ metav1.Object) bool { return s.Phase == live.RolloutPaused })
		// The pods in flight finish; no new one starts.
		time.Sleep(2 * time.Second)
		n := e.updatedPods(pause.Name, slow)
		time.Sleep(3 * time.Second)
		if m := e.updatedPods(pause.Name, slow); m != n || n >= pause.Want {
			t.Errorf("statefulset/pause: %d pods updated when paused, %d 3s later, of %d: want no new pod updated while paused, mid-rollout", n, m, pause.Want)
		}
		if out, _, _ := e.cli("status", "statefulset/"+pause.Name); !strings.Contains(out, "Controller:") || !strings.Contains(out, live.RolloutPaused) {
			t.Errorf("rollplan status while paused does not show the controller's record Paused:\n%s", out)
		}
		e.logf("statefulset/pause: paused with %d of %d pods updated", n, pause.Want)
		// The controller drives it: resume says so, not "rollplan apply".
		if out := e.mustCLI("resume", "statefulset/"+pause.Name); !strings.Contains(out, "resumed: the rollplan controller carries on") {
			t.Errorf("rollplan resume of a rollout the controller drives:\n%s\nwant it to name the controller", out)
		}
	})

	var wg sync.WaitGroup
	var waited struct {
		out, errOut string
		code        int
	}
	t.Run("apply refused while the controller drives", func(t *testing.T) {
		e.setTemplate("StatefulSet", roll.Name, setImage(slower))
		e.waitUpdated(roll.Name, slower, 1, 30*time.Second)
		holder := e.driverHolder("StatefulSet", roll.Name)
		if holder != controllerHolder(leader) {
			t.Fatalf("driver Lease of statefulset/roll held by %q, want the leader %q", holder, controllerHolder(leader))
		}
		out, errOut, code := e.cli("apply", "statefulset/"+roll.Name)
		lease := e.ns + "/rollplan-statefulset-" + roll.Name
		if code != 1 || !strings.Contains(errOut, "rollplan controller") || !strings.Contains(errOut, leader.identity) || !strings.Contains(errOut, "Lease "+lease) {
			t.Errorf("rollplan apply while the controller drives: exit code %d, want 1 and a message naming the controller %s and Lease %s:\n%s%s", code, leader.identity, lease, out, errOut)
		}
		t.Logf("rollplan apply: exit code %d: %s", code, strings.TrimSpace(errOut))
		out = e.mustCLI("status", "statefulset/"+roll.Name)
		if !strings.Contains(out, "Driver:") || !strings.Contains(out, controllerHolder(leader)) || !strings.Contains(out, "Controller:") || !strings.Contains(out, live.RolloutInProgress) {
			t.Errorf("rollplan status mid-rollout does not show the driver %q and the controller's record InProgress:\n%s", controllerHolder(leader), out)
		}
		// Six pods one at a time: six waves, however far it has gone.
		if !regexp.MustCompile(`: in progress(, driven by [^:]*)?: wave [1-6] of 6\n`).MatchString(out) || !regexp.MustCompile(`Controller: +InProgress: wave [1-6] of 6;`).MatchString(out) {
			t.Errorf("rollplan status mid-rollout does not number the waves of the rollout's own plan (of 6), in the verdict and the controller's record:\n%s", out)
		}
		// A person who wants to drive it anyway waits for the controller.
		wg.Add(1)
		go func() {
			defer wg.Done()
			waited.out, waited.errOut, waited.code = e.cli("apply", "statefulset/"+roll.Name, "--wait-for-lease", "--timeout", "2m")
		}()
	})

	t.Run("rollover", func(t *testing.T) {
		// Mid-rollout: some pods at the slow image, not all.
		e.waitUpdated(roll.Name, slower, 2, 30*time.Second)
		if n := e.updatedPods(roll.Name, slower); n >= roll.Want {
			t.Fatalf("statefulset/roll: all %d pods already at %s: the rollover would not be mid-rollout", n, slower)
		}
		old, _ := e.state("StatefulSet", roll.Name)
		e.setTemplate("StatefulSet", roll.Name, setImage(good))
		st := e.waitState("StatefulSet", roll.Name, "at the newest revision", 30*time.Second, func(s *live.RolloutState, _ metav1.Object) bool {
			return s.Revision != "" && s.Revision != old.Revision
		})
		retargeted := time.Now()
		e.logf("statefulset/roll re-targeted from %s to %s", old.Revision, st.Revision)
		for pod, at := range w.changedTo(roll.Name, slower) {
			if at.After(retargeted) {
				t.Errorf("pod %s was updated to %s at %s, after the controller recorded the newest revision %s (%s)", pod, slower, at.Format(time.StampMilli), st.Revision, retargeted.Format(time.StampMilli))
			}
		}
	})

	t.Run("halt until resume", func(t *testing.T) {
		st := e.waitState("StatefulSet", strict.Name, "Halted", 30*time.Second, func(s *live.RolloutState, _ metav1.Object) bool { return s.Phase == live.RolloutHalted })
		if !strings.Contains(strings.Join(st.Reasons, "; "), "InPlaceOnly") || st.Message == "" {
			t.Errorf("statefulset/strict halted with reasons %q, message %q: want the InPlaceOnly reason", st.Reasons, st.Message)
		}
		versions := map[string]string{}
		for _, p := range e.pods("app=" + strict.Name) {
			versions[p.Name] = p.ResourceVersion
		}
		halts := e.eventCount("StatefulSet", strict.Name, "RolloutHalted", corev1.EventTypeWarning)
		if halts == 0 {
			t.Errorf("statefulset/strict: no Warning Event RolloutHalted")
		}
		// Allowing recreation does not end the halt by itself.
		e.kubectl("annotate", "statefulset/"+strict.Name, facts.AnnPodUpdatePolicy+"=InPlaceIfPossible", "--overwrite")
		time.Sleep(3 * time.Second)
		if st, _ := e.state("StatefulSet", strict.Name); st.Phase != live.RolloutHalted {
			t.Errorf("statefulset/strict: %s, want it to stay Halted until resumed", st.Summary())
		}
		for _, p := range e.pods("app=" + strict.Name) {
			if versions[p.Name] != p.ResourceVersion {
				t.Errorf("statefulset/strict: pod %s changed while halted", p.Name)
			}
		}
		if n := e.eventCount("StatefulSet", strict.Name, "RolloutHalted", corev1.EventTypeWarning); n != halts {
			t.Errorf("statefulset/strict: %d RolloutHalted Events, then %d: a halted rollout was stepped again", halts, n)
		}
		out, _, code := e.cli("status", "statefulset/"+strict.Name)
		if !strings.Contains(out, live.RolloutHalted) || !strings.Contains(out, "InPlaceOnly") {
			t.Errorf("rollplan status (exit code %d) does not show the halt and its reason:\n%s", code, out)
		}
		e.mustCLI("resume", "statefulset/"+strict.Name)
	})

	t.Run("halt until the template changes", func(t *testing.T) {
		st := e.waitState("StatefulSet", broken.Name, "Halted", 30*time.Second, func(s *live.RolloutState, _ metav1.Object) bool { return s.Phase == live.RolloutHalted })
		if !strings.Contains(strings.Join(st.Reasons, "; "), "crash") {
			t.Errorf("statefulset/broken halted with reasons %q: want a crash loop", st.Reasons)
		}
		if e.eventCount("StatefulSet", broken.Name, "RolloutHalted", corev1.EventTypeWarning) == 0 {
			t.Errorf("statefulset/broken: no Warning Event RolloutHalted")
		}
		n := e.updatedPods(broken.Name, bad)
		time.Sleep(2 * time.Second)
		if m := e.updatedPods(broken.Name, bad); m != n || n == 0 || n > broken.Budget {
			t.Errorf("statefulset/broken: %d pods on the broken image when halted, %d 2s later: want the first wave only, and no more", n, m)
		}
		e.setTemplate("StatefulSet", broken.Name, setImage(good))
	})

	took := e.waitRolledOut(all, 2*time.Minute)
	e.logf("every rollout complete %.1fs after the last change", took.Seconds())
	wg.Wait()
	if waited.code != 0 || !strings.Contains(waited.errOut, "waiting for the driver Lease") {
		t.Errorf("rollplan apply --wait-for-lease: exit code %d, want 0 after waiting for the controller:\n%s%s", waited.code, waited.out, waited.errOut)
	}
	e.checkPods(roll, before[roll.Name], good, "a")
	e.checkPods(pause, before[pause.Name], slow, "a")
	e.checkPods(strict, before[strict.Name], "example.com/app:v1", "b")
	e.checkPods(broken, before[broken.Name], good, "a")
	// Two template changes for roll and broken: a pod may be updated
	// once to each.
	w.check(e, roll.Name, since, 2)
	w.check(e, pause.Name, since, 1)
	w.check(e, strict.Name, since, 1)
	w.check(e, broken.Name, since, 2)
	if out := e.mustCLI("status", "statefulset/"+roll.Name); !strings.Contains(out, "Controller:") || !strings.Contains(out, live.RolloutComplete) {
		t.Errorf("rollplan status after the rollout does not show the controller's record Complete:\n%s", out)
	}
}

// eventCount counts the Events of a reason and type about the workload,
// each with its series.
func (e *env) eventCount(kind, name, reason, typ string) int {
	e.t.Helper()
	n := 0
	for _, ev := range e.events(kind, name, reason) {
		if ev.Type != typ {
			continue
		}
		n++
		if ev.Series != nil {
			n += int(ev.Series.Count)
		}
		if ev.DeprecatedCount > 1 {
			n += int(ev.DeprecatedCount) - 1
		}
	}
	return n
}
