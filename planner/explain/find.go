package explain

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/rollplan/rollplan/planner/facts"
	"github.com/rollplan/rollplan/planner/plan"
	"github.com/rollplan/rollplan/planner/request"
)

// FindPod finds pod arg (POD, or NAMESPACE/POD) in res, in namespace when
// arg names none ("" for every namespace), and returns its workload and
// pod indexes for Pod. failed are the workloads that could not be
// planned: a pod not found may be one of theirs, and the error says so.
func FindPod(res *plan.Result, failed []*facts.WorkloadError, arg, namespace string) (workloadIndex, podIndex int, err error) {
	ns, name := namespace, arg
	if i := strings.Index(arg, "/"); i >= 0 {
		ns, name = arg[:i], arg[i+1:]
	}
	for wi, det := range res.Details {
		r := det.Facts
		if ns != "" && r.Workload.Namespace != ns {
			continue
		}
		for i := range r.Pods {
			if r.Pods[i].Name == name {
				return wi, i, nil
			}
		}
	}
	// Not found: say where it was looked for, and where it is.
	var elsewhere []string
	for _, det := range res.Details {
		r := det.Facts
		for i := range r.Pods {
			if r.Pods[i].Name == name && !slices.Contains(elsewhere, r.Workload.Namespace) {
				elsewhere = append(elsewhere, r.Workload.Namespace)
			}
		}
	}
	sort.Strings(elsewhere)
	switch {
	case ns == "":
		err = fmt.Errorf("pod %s is not a pod of any Deployment, StatefulSet or DaemonSet in the snapshot: check the pod name", arg)
	case len(elsewhere) > 0:
		err = fmt.Errorf("pod %s is not a pod of any Deployment, StatefulSet or DaemonSet in namespace %q of the snapshot; a pod of that name is in %s: explain %s/%s, or pass -n %s", name, ns, request.Namespaces(elsewhere), elsewhere[0], name, elsewhere[0])
	default:
		err = fmt.Errorf("pod %s is not a pod of any Deployment, StatefulSet or DaemonSet in namespace %q of the snapshot: check the name and the namespace", name, ns)
	}
	// It may be a pod of a workload that could not be planned.
	var why []string
	for _, e := range failed {
		if ns == "" || e.Namespace == ns {
			why = append(why, e.Error())
		}
	}
	if len(why) > 0 {
		err = fmt.Errorf("%w; it may be a pod of a workload that could not be planned: %s", err, strings.Join(why, "; "))
	}
	return -1, -1, err
}
