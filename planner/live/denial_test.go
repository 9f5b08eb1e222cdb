package live

import (
	"errors"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestGateDenied(t *testing.T) {
	withCause := func(err *apierrors.StatusError, ct metav1.CauseType) *apierrors.StatusError {
		err.ErrStatus.Details = &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: ct, Message: "x"}}}
		return err
	}
	forbidden := func(msg string) *apierrors.StatusError {
		return apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "web-1", errors.New(msg))
	}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"the gate's 403", withCause(forbidden("rollplan gate: budget"), GateDenialCause), true},
		{"the gate's 429, wrapped", fmt.Errorf("evict: %w", withCause(apierrors.NewTooManyRequests("rollplan gate: not now", 0), GateDenialCause)), true},
		{"a 403 that only names the gate", forbidden("rollplan gate: budget"), false},
		{"another cause", withCause(forbidden("no"), metav1.CauseTypeFieldValueInvalid), false},
		{"not an API error", errors.New("rollplan gate"), false},
		{"no error", nil, false},
	} {
		if got := GateDenied(tc.err); got != tc.want {
			t.Errorf("%s: GateDenied = %v, want %v", tc.name, got, tc.want)
		}
	}
}
