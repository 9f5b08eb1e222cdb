package live

import (
	"fmt"
)

// Target names one workload: Kind is capture.StatefulSet, capture.DaemonSet
// or capture.Deployment.
type Target struct {
	Namespace, Kind, Name string
}

func (t Target) String() string { return fmt.Sprintf("%s %s/%s", t.Kind, t.Namespace, t.Name) }
