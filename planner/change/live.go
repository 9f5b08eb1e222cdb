package change

import (
	"context"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	"k8s.io/client-go/kubernetes"
)

// FieldManager is the field manager of rollplan's dry-run applies.
const FieldManager = "rollplan"

// DryRunError is a proposed object the API server refused (validation,
// admission): the plan cannot be previewed from it.
type DryRunError struct {
	Object *Object
	Err    error
}

func (e *DryRunError) Error() string {
	return fmt.Sprintf("%s (%s): the API server refused the change (server-side dry-run apply): %v: fix the manifest, or ask the cluster's admins about the admission rule named", e.Object.ID(), e.Object.Where, e.Err)
}

func (e *DryRunError) Unwrap() error { return e.Err }

// DryRun sends each proposed object to the API server as a server-side
// apply with dryRun=All (field manager FieldManager, conflicts forced, as
// kubectl apply --server-side --force-conflicts), so that its defaults,
// mutating admission and validation are exactly the cluster's, and puts
// the object the server answers in o.Obj. Nothing is stored. The first
// refusal is returned as a *DryRunError.
func DryRun(ctx context.Context, client kubernetes.Interface, objs []*Object) error {
	opts := metav1.ApplyOptions{DryRun: []string{metav1.DryRunAll}, FieldManager: FieldManager, Force: true}
	for _, o := range objs {
		var got metav1.Object
		var err error
		apps := client.AppsV1()
		switch o.Kind {
		case Deployment:
			ac := &appsv1ac.DeploymentApplyConfiguration{}
			if err = json.Unmarshal(o.Raw, ac); err == nil {
				got, err = apps.Deployments(o.Namespace).Apply(ctx, ac, opts)
			}
		case StatefulSet:
			ac := &appsv1ac.StatefulSetApplyConfiguration{}
			if err = json.Unmarshal(o.Raw, ac); err == nil {
				got, err = apps.StatefulSets(o.Namespace).Apply(ctx, ac, opts)
			}
		case DaemonSet:
			ac := &appsv1ac.DaemonSetApplyConfiguration{}
			if err = json.Unmarshal(o.Raw, ac); err == nil {
				got, err = apps.DaemonSets(o.Namespace).Apply(ctx, ac, opts)
			}
		default:
			err = fmt.Errorf("kind %s cannot be previewed", o.Kind)
		}
		if err != nil {
			return &DryRunError{Object: o, Err: err}
		}
		o.Obj = got
	}
	return nil
}
