package facts

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/rollplan/rollplan/planner/snapshot"
)

// A StatefulSet's maxUnavailable of 0 (the field, or the annotation of a
// managed OnDelete set) is an error naming the object and the field: no
// pod could ever update, and the API server rejects the field.
func TestStatefulSetMaxUnavailableZero(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name, scenario string
		set            func(*snapshot.Snapshot)
		want           string
	}{
		{"field 0", "sts-maxunavailable-percent", func(s *snapshot.Snapshot) {
			v := intstr.FromInt32(0)
			s.StatefulSets[0].Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = &v
		}, "spec.updateStrategy.rollingUpdate.maxUnavailable 0: must be at least 1"},
		{"field 0%", "sts-maxunavailable-percent", func(s *snapshot.Snapshot) {
			v := intstr.FromString("0%")
			s.StatefulSets[0].Spec.UpdateStrategy.RollingUpdate.MaxUnavailable = &v
		}, "spec.updateStrategy.rollingUpdate.maxUnavailable 0%: must be at least 1"},
		{"annotation 0", "sts-ondelete-managed", func(s *snapshot.Snapshot) {
			s.StatefulSets[0].Annotations[AnnMaxUnavailable] = "0"
		}, "annotation rollplan.dev/max-unavailable=0: must be at least 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			snap, _, err := snapshot.LoadFiles([]string{filepath.Join("../../testdata/scenarios", c.scenario, "snapshot.yaml")})
			if err != nil {
				t.Fatal(err)
			}
			c.set(snap)
			_, err = Build(snap, Options{Now: now})
			name := "StatefulSet " + snap.StatefulSets[0].Namespace + "/" + snap.StatefulSets[0].Name
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), name) {
				t.Fatalf("error %v, want one naming %s and containing %q", err, name, c.want)
			}
		})
	}
}
