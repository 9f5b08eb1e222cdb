package executor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/rollplan/rollplan/planner/engine/native"
	"github.com/rollplan/rollplan/planner/live"
)

// The eviction REST's refusals, as kube-apiserver builds them
// (pkg/registry/core/pod/storage/eviction.go, checkAndDecrement).
var pdbResource = schema.GroupResource{Group: policyv1.GroupName, Resource: "poddisruptionbudget"}

// pdbTooMany: a 429 with the DisruptionBudget cause (v1.36 and v1.37).
func pdbTooMany(msg string) error {
	err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{Type: policyv1.DisruptionBudgetCause, Message: msg})
	return err
}

// pdbForbidden: a 403 naming the PDB, with the cause from v1.37 only.
func pdbForbidden(pdb, detail, cause string) error {
	err := apierrors.NewForbidden(pdbResource, pdb, errors.New(detail))
	if cause != "" {
		err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{Type: policyv1.DisruptionBudgetCause, Message: cause})
	}
	return err
}

// gateForbidden is the rollplan gate's denial as the API server returns
// it: the webhook's 403 status, its cause included.
func gateForbidden(pod, msg string) error {
	err := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, pod, errors.New(msg))
	err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: live.GateDenialCause, Message: msg}}
	return err
}

func TestPDBRefusal(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   error
		ok    bool
		by    string
		cause string
		next  string
	}{
		{"v1.37 403, out-of-order status: the cause", pdbForbidden("web-pdb", "pdb disruptions allowed is negative",
			"The disruption budget web-pdb does not allow evicting pods currently: pdb disruptions allowed is negative"), true,
			"PodDisruptionBudget shop/web-pdb", "The disruption budget web-pdb does not allow evicting pods currently: pdb disruptions allowed is negative",
			"check that kube-controller-manager's disruption controller runs and updates it (kubectl get pdb -n shop web-pdb -o yaml"},
		{"v1.36 403: no cause, the details name the PDB", pdbForbidden("web-pdb", "DisruptedPods map too big - too many evictions not confirmed by PDB controller", ""), true,
			"PodDisruptionBudget shop/web-pdb", `poddisruptionbudget.policy "web-pdb" is forbidden: DisruptedPods map too big`, "rollplan tries again"},
		{"429 with the cause: not now, the cause names the PDB", pdbTooMany("The disruption budget web-pdb needs 3 healthy pods and has 2 currently"), true,
			"a PodDisruptionBudget in namespace shop", "The disruption budget web-pdb needs 3 healthy pods and has 2 currently",
			"once the budget allows a disruption, when the pods it selects are healthy again (kubectl get pdb -n shop)"},
		{"a cause of another type is not a PDB's", func() error {
			err := apierrors.NewTooManyRequests("slow down", 1)
			err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: metav1.CauseTypeUnexpectedServerResponse, Message: "x"}}
			return err
		}(), false, "", "", ""},
		{"429 without a cause (the rollplan gate, flow control): left to the older recognition", apierrors.NewTooManyRequests("rollplan gate: not now", 1), false, "", "", ""},
		{"403 of RBAC: not a PDB's", apierrors.NewForbidden(schema.GroupResource{Resource: "pods/eviction"}, "web-1", errors.New("no")), false, "", "", ""},
		{"403 of the rollplan gate", gateForbidden("web-1", "rollplan gate: budget"), false, "", "", ""},
		{"wrapped", fmt.Errorf("evict: %w", pdbTooMany("The disruption budget db is still being processed by the server.")), true,
			"a PodDisruptionBudget in namespace shop", "The disruption budget db is still being processed by the server.", "rollplan tries again"},
		{"not an API error", errors.New("connection refused"), false, "", "", ""},
		{"no error", nil, false, "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, ok := pdbRefusal(tc.err, "shop")
			if ok != tc.ok || r.by != tc.by || !strings.Contains(r.cause, tc.cause) || !strings.Contains(r.next, tc.next) {
				t.Errorf("pdbRefusal = %+v, %v; want by %q, cause containing %q, next containing %q, %v", r, ok, tc.by, tc.cause, tc.next, tc.ok)
			}
		})
	}
}

// A step that evicts: each refusal is recognised and said in the action's
// reason with its metric; a refusal that is no PDB's and no gate's is an
// error, as before.
func TestEvictionRefusalInStep(t *testing.T) {
	negative := pdbForbidden("web-pdb", "pdb disruptions allowed is negative",
		"The disruption budget web-pdb does not allow evicting pods currently: pdb disruptions allowed is negative")
	for _, tc := range []struct {
		name   string
		err    error
		metric string
		reason string // of the first action; "" for an error
		errMsg string
	}{
		{"v1.37 PDB 403: not now, its cause and what to do", negative, outcomeSkippedPDB,
			"eviction refused for now by PodDisruptionBudget default/web-pdb: The disruption budget web-pdb does not allow evicting pods currently: pdb disruptions allowed is negative; the budget's status is out of order", ""},
		{"v1.36 PDB 403 without the cause: the same, from the details", pdbForbidden("web-pdb", "pdb disruptions allowed is negative", ""), outcomeSkippedPDB,
			`eviction refused for now by PodDisruptionBudget default/web-pdb: poddisruptionbudget.policy "web-pdb" is forbidden: pdb disruptions allowed is negative; the budget's status is out of order`, ""},
		{"PDB 429 with its cause", pdbTooMany("The disruption budget web-pdb needs 4 healthy pods and has 3 currently"), outcomeSkippedPDB,
			"eviction refused for now by a PodDisruptionBudget in namespace default: The disruption budget web-pdb needs 4 healthy pods and has 3 currently; rollplan tries again once the budget allows a disruption", ""},
		{"429 without a cause: the older recognition", apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10), outcomeSkippedPDB,
			"eviction refused for now (a PodDisruptionBudget, the rollplan gate or the API server's flow control; 429)", ""},
		{"the rollplan gate's 403", gateForbidden("web-3", "rollplan gate: budget maxUnavailable"), outcomeSkippedBudget,
			"denied by the rollplan gate for now", ""},
		{"a 403 that names the gate without its cause is an error", apierrors.NewForbidden(schema.GroupResource{Resource: "pods/eviction"}, "web-3", errors.New("rollplan gate: budget")), outcomeError,
			"", "Recreate web-3: pods/eviction \"web-3\" is forbidden: rollplan gate: budget"},
		{"any other 403 is an error", apierrors.NewForbidden(schema.GroupResource{Resource: "pods/eviction"}, "web-3", errors.New("RBAC")), outcomeError,
			"", "Recreate web-3: pods/eviction \"web-3\" is forbidden: RBAC"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(4, appsv1.OnDeleteStatefulSetStrategyType, true, "example.com/app:v1", "b")
			cs := c.client(&recorder{}, func(string) error { return tc.err })
			var log bytes.Buffer
			x := testExec(t, cs, "StatefulSet", "web", native.New(), false, &log)
			res, err := x.Step(context.Background())
			if tc.errMsg != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errMsg) {
					t.Fatalf("error %v, want one containing %q", err, tc.errMsg)
				}
			} else {
				if err != nil {
					t.Fatalf("step: %v\n%s", err, log.String())
				}
				if len(res.Actions) == 0 || res.Actions[0].Outcome != Skipped || !strings.Contains(res.Actions[0].Reason, tc.reason) {
					t.Fatalf("actions %+v, want the first skipped with a reason containing %q", res.Actions, tc.reason)
				}
			}
			if n := testutil.ToFloat64(x.Metrics().Actions.WithLabelValues("StatefulSet", "Recreate", tc.metric)); n < 1 {
				t.Errorf("no Recreate counted %s", tc.metric)
			}
		})
	}
}
