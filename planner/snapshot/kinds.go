package snapshot

import (
	"fmt"
	"slices"
	"strings"
)

// AppsKinds are the kinds of the apps group (apps/v1): any other kind
// there is a slip, not an object of a kind rollplan does not read.
var AppsKinds = []string{"Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "ControllerRevision"}

// readKindList are the kinds a snapshot is made of (readKinds, as a list).
var readKindList = []string{"Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "ControllerRevision", "Pod", "Node", "PodDisruptionBudget"}

// KindSlip is the kind of known that kind was meant to be: the same but
// for case, or one letter added, left out, changed or two swapped (case
// aside); "" when kind is one of known or none is that close. One letter
// only: kinds two letters apart are real and different (Role, Node).
func KindSlip(kind string, known []string) string {
	if slices.Contains(known, kind) {
		return ""
	}
	lower := strings.ToLower(kind)
	for _, k := range known {
		if oneEdit(lower, strings.ToLower(k)) {
			return k
		}
	}
	return ""
}

// oneEdit reports whether a and b are equal or one edit apart: a letter
// added, left out, changed, or two neighbours swapped.
func oneEdit(a, b string) bool {
	if a == b {
		return true
	}
	if len(a) > len(b) {
		a, b = b, a
	}
	if len(b)-len(a) > 1 {
		return false
	}
	i := 0
	for i < len(a) && a[i] == b[i] {
		i++
	}
	if len(a) < len(b) {
		return a[i:] == b[i+1:]
	}
	return a[i+1:] == b[i+1:] || i+1 < len(a) && a[i] == b[i+1] && a[i+1] == b[i] && a[i+2:] == b[i+2:]
}

// KindError is an object whose kind field is a slip: no kind of the apps
// group, or a kind the reader takes but for case or one letter. Other
// kinds (a Service, another group's StatefulSet) are not slips: readers
// leave them out with a warning.
type KindError struct {
	// Where the object was read ("snap.yaml: document 2, items[0]").
	Where                             string
	APIVersion, Kind, Namespace, Name string
	// Suggest: the kind meant, "" when none is close.
	Suggest string
	// Reads: what the reader takes, for the message ("a kind rollplan
	// reads", "a kind --change previews").
	Reads string
}

func (e *KindError) Error() string {
	var msg string
	if group(e.APIVersion) == "apps" {
		msg = fmt.Sprintf("%s has no kind %q", e.APIVersion, e.Kind)
		if e.Suggest == "" {
			msg += fmt.Sprintf(" (it has %s and %s)", strings.Join(AppsKinds[:len(AppsKinds)-1], ", "), AppsKinds[len(AppsKinds)-1])
		}
	} else {
		msg = fmt.Sprintf("%q is not %s", e.Kind, e.Reads)
	}
	switch {
	case strings.EqualFold(e.Suggest, e.Kind):
		msg += fmt.Sprintf(": did you mean %s? (kinds are case-sensitive)", e.Suggest)
	case e.Suggest != "":
		msg += fmt.Sprintf(": did you mean %s?", e.Suggest)
	default:
		msg += ": fix the kind or the apiVersion"
	}
	return fmt.Sprintf("%s: %s: field kind: %s", e.Where, objectID(e.Kind, e.Namespace, e.Name), msg)
}

// CheckKind is a *KindError when kind (of apiVersion) is not one of known
// but a slip for one, or no kind of the apps group; nil otherwise. reads
// words what known is, for the message.
func CheckKind(where, apiVersion, kind, namespace, name string, known []string, reads string) error {
	e := &KindError{Where: where, APIVersion: apiVersion, Kind: kind, Namespace: namespace, Name: name, Reads: reads}
	if group(apiVersion) == "apps" {
		if slices.Contains(AppsKinds, kind) {
			return nil
		}
		if e.Suggest = KindSlip(kind, AppsKinds); e.Suggest == "" {
			e.Suggest = KindSlip(kind, known)
		}
		return e
	}
	if e.Suggest = KindSlip(kind, known); e.Suggest == "" {
		return nil
	}
	return e
}

// group is apiVersion's group: "" for the core group (v1).
func group(apiVersion string) string {
	g, _, ok := strings.Cut(apiVersion, "/")
	if !ok {
		return ""
	}
	return g
}
