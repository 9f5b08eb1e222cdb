package executor

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/live"
	"github.com/rollplan/rollplan/planner/snapshot/capture"
)

// SetPaused pauses (annotates facts.AnnPaused="true") or resumes (removes
// it) the rollout of a workload. The state lives on the workload, so every
// executor honours it at its next step: a paused rollout starts no new
// action (pods already being updated finish) until it is resumed. Pausing
// a managed Deployment also sets spec.paused, so a rollout handed to the
// Deployment controller stops too; resuming leaves spec.paused to the
// executor, which clears it again only if the rollout needs the controller.
func SetPaused(ctx context.Context, c kubernetes.Interface, t live.Target, paused bool, dryRun bool) error {
	var ann any // null removes the annotation
	if paused {
		ann = "true"
	}
	anns := map[string]any{facts.AnnPaused: ann}
	if !paused {
		// Resuming also ends a halt the controller recorded: it steps
		// the rollout again, and records it anew.
		anns[facts.AnnRolloutState] = nil
	}
	patch := map[string]any{"metadata": map[string]any{"annotations": anns}}
	switch t.Kind {
	case capture.Deployment:
		if paused {
			d, err := c.AppsV1().Deployments(t.Namespace).Get(ctx, t.Name, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("%s: %w", t, err)
			}
			if d.Annotations[facts.AnnManaged] != "true" {
				return fmt.Errorf("%s is not managed by rollplan (annotation %s): its controller rolls it; pause it with `kubectl rollout pause deployment/%s -n %s`", t, facts.AnnManaged, t.Name, t.Namespace)
			}
			patch["spec"] = map[string]any{"paused": true}
		}
	case capture.StatefulSet, capture.DaemonSet:
	default:
		return fmt.Errorf("%s: want a Deployment, StatefulSet or DaemonSet", t)
	}
	raw, err := json.Marshal(patch)
	if err == nil && !paused && !dryRun {
		// A halt of the analysis gate ends too: the wave is measured again.
		_, err = ResumeAnalysis(ctx, c, t, time.Now())
	}
	if err == nil {
		err = clientWriter{client: c, dryRun: dryRun}.patchWorkload(ctx, t, raw)
	}
	if err != nil {
		verb := "resume"
		if paused {
			verb = "pause"
		}
		return fmt.Errorf("%s: %s: %w", t, verb, err)
	}
	return nil
}
