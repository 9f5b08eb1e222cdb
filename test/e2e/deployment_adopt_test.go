package e2e

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/rollplan/rollplan/internal/testobj"
)

// TestDeploymentAdoptsReplicaSetTemplate pins the upstream behaviour the
// in-place Deployment update of issue 7 builds on (docs/deployment-in-place.md),
// on the real kube-controller-manager:
//
//  1. a paused Deployment whose template changes gets no new ReplicaSet
//     (and reports 0 updated replicas);
//  2. once its ReplicaSet's template equals the Deployment's (the
//     pod-template-hash label aside), the controller takes that ReplicaSet
//     as the new one and counts all its pods updated — before any pod
//     changed;
//  3. after the pods are updated in place and the Deployment is resumed,
//     the rollout is complete with the same ReplicaSet, the same pods, and
//     the revision unchanged (there is no older ReplicaSet to number from).
func TestDeploymentAdoptsReplicaSetTemplate(t *testing.T) {
	e := newEnv(t, 3)
	d := testobj.Deployment(e.ns, "api").Replicas(3).Image("example.com/app:v1").Obj()
	if _, err := e.client.AppsV1().Deployments(e.ns).Create(e.ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// waitFor polls the Deployment until ok says it is in the state wanted.
	waitFor := func(what string, ok func(*appsv1.Deployment) bool) *appsv1.Deployment {
		t.Helper()
		var dep *appsv1.Deployment
		err := wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			var err error
			dep, err = e.client.AppsV1().Deployments(e.ns).Get(ctx, "api", metav1.GetOptions{})
			return err == nil && dep.Status.ObservedGeneration == dep.Generation && ok(dep), nil
		})
		if err != nil {
			t.Fatalf("%s: %v (status %+v)", what, err, dep.Status)
		}
		return dep
	}
	replicaSets := func() []appsv1.ReplicaSet {
		t.Helper()
		l, err := e.client.AppsV1().ReplicaSets(e.ns).List(e.ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return l.Items
	}
	patch := func(kind, name string, p any) {
		t.Helper()
		raw, _ := json.Marshal(p)
		var err error
		switch kind {
		case "Deployment":
			_, err = e.client.AppsV1().Deployments(e.ns).Patch(e.ctx, name, types.StrategicMergePatchType, raw, metav1.PatchOptions{})
		case "ReplicaSet":
			_, err = e.client.AppsV1().ReplicaSets(e.ns).Patch(e.ctx, name, types.StrategicMergePatchType, raw, metav1.PatchOptions{})
		case "Pod":
			_, err = e.client.CoreV1().Pods(e.ns).Patch(e.ctx, name, types.StrategicMergePatchType, raw, metav1.PatchOptions{})
		}
		if err != nil {
			t.Fatalf("patch %s %s: %v", kind, name, err)
		}
	}
	image := func(img string) map[string]any {
		return map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "app", "image": img}}}}}}
	}

	waitFor("rolled out at v1", func(d *appsv1.Deployment) bool {
		return d.Status.AvailableReplicas == 3 && d.Status.UpdatedReplicas == 3
	})
	before := uids(e.pods("app=api"))
	rss := replicaSets()
	if len(rss) != 1 {
		t.Fatalf("%d ReplicaSets after the first rollout", len(rss))
	}
	rs := rss[0].Name

	patch("Deployment", "api", map[string]any{"spec": map[string]any{"paused": true}})
	patch("Deployment", "api", image("example.com/app:v2"))
	waitFor("1. paused with a new template: nothing updated", func(d *appsv1.Deployment) bool { return d.Status.UpdatedReplicas == 0 })
	time.Sleep(time.Second) // give the controller room to (wrongly) create a ReplicaSet
	if n := len(replicaSets()); n != 1 {
		t.Fatalf("1. a paused Deployment got a new ReplicaSet: %d ReplicaSets", n)
	}

	patch("ReplicaSet", rs, image("example.com/app:v2"))
	waitFor("2. the ReplicaSet with the Deployment's template is the new one", func(d *appsv1.Deployment) bool { return d.Status.UpdatedReplicas == 3 })
	for _, p := range e.pods("app=api") {
		if p.Spec.Containers[0].Image != "example.com/app:v1" {
			t.Fatalf("2. pod %s changed by itself: %s", p.Name, p.Spec.Containers[0].Image)
		}
	}

	for _, p := range e.pods("app=api") {
		patch("Pod", p.Name, map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "app", "image": "example.com/app:v2"}}}})
	}
	patch("Deployment", "api", map[string]any{"spec": map[string]any{"paused": false}})
	dep := waitFor("3. resumed: complete", func(d *appsv1.Deployment) bool {
		for _, c := range d.Status.Conditions {
			if c.Type == appsv1.DeploymentProgressing {
				return c.Reason == "NewReplicaSetAvailable" && d.Status.AvailableReplicas == 3 && d.Status.UpdatedReplicas == 3
			}
		}
		return false
	})
	time.Sleep(time.Second)
	if rss := replicaSets(); len(rss) != 1 || rss[0].Name != rs {
		t.Errorf("3. ReplicaSets after resuming: %d, want only %s", len(rss), rs)
	}
	for _, p := range e.pods("app=api") {
		if before[p.Name] != p.UID || p.Status.ContainerStatuses[0].Image != "example.com/app:v2" {
			t.Errorf("3. pod %s: uid %s (was %s), running %s", p.Name, p.UID, before[p.Name], p.Status.ContainerStatuses[0].Image)
		}
	}
	if rev := dep.Annotations["deployment.kubernetes.io/revision"]; rev != "1" {
		t.Errorf("3. revision %q, want it unchanged at 1 (rollplan must number in-place revisions itself)", rev)
	}
}
