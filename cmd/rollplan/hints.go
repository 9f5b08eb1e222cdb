package main

import (
	"strings"

	"github.com/rollplan/rollplan/planner/live"
)

// commandFor is a command line the user can paste to act on the workload t
// next: "rollplan resume statefulset/web -n prod --context staging". It
// names the namespace the command ran in (resolved, so the line works from
// any default) and repeats the kubeconfig and context flags given.
func commandFor(k *kubeFlags, command string, t live.Target) string {
	return command + " " + strings.ToLower(t.Kind) + "/" + t.Name + k.hintFlags(t.Namespace)
}

// hintFlags: " -n NAMESPACE", then --kubeconfig and --context as given.
func (k *kubeFlags) hintFlags(namespace string) string {
	var b strings.Builder
	add := func(flag, v string) {
		if v != "" {
			b.WriteString(" " + flag + " " + shellQuote(v))
		}
	}
	add("-n", namespace)
	if k.rules != nil {
		add("--kubeconfig", k.rules.ExplicitPath)
	}
	add("--context", k.overrides.CurrentContext)
	return b.String()
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=@,+%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
