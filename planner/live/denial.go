package live

import (
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// GateDenialCause is the status cause type the rollplan gate attaches to
// every admission denial it answers (details.causes). The API server passes
// a webhook's status through, so the caller gets it with the gate's reason
// (Forbidden, or TooManyRequests for an eviction: clients that know nothing
// of rollplan, such as kubectl drain, act on the code alone), and the
// executor tells the gate's "not now" from every other refusal by it.
const GateDenialCause metav1.CauseType = "rollplan.dev/GateDenied"

// GateDenied reports whether err is an API error carrying GateDenialCause.
func GateDenied(err error) bool {
	var st apierrors.APIStatus
	if err == nil || !errors.As(err, &st) {
		return false
	}
	d := st.Status().Details
	if d == nil {
		return false
	}
	for _, c := range d.Causes {
		if c.Type == GateDenialCause {
			return true
		}
	}
	return false
}
