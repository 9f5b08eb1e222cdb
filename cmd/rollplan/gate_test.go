package main

import (
	"strings"
	"testing"
)

// The gate's own namespace (its reservations; never gated) is -n, else
// POD_NAMESPACE, else rollplan-system: never the kubeconfig's namespace,
// which from a workstation is "default", and the gate would exempt it.
func TestGateNamespace(t *testing.T) {
	for _, c := range []struct {
		name, flag, env string
		want, from      string
	}{
		{"-n", "gate", "rollplan-system", "gate", "--namespace"},
		{"POD_NAMESPACE", "", "platform", "platform", "POD_NAMESPACE"},
		{"neither", "", "", "rollplan-system", "built-in default"},
	} {
		if ns, from := gateNamespace(c.flag, c.env); ns != c.want || from != c.from {
			t.Errorf("%s: namespace %s (from %s), want %s (from %s)", c.name, ns, from, c.want, c.from)
		}
	}
	// The help says so, and offers the flags.
	cmd := newGateCommand()
	for _, want := range []string{"-n/--namespace when given, else the POD_NAMESPACE", "else rollplan-system", "--shutdown-delay"} {
		if !strings.Contains(cmd.Long, want) {
			t.Errorf("gate --help does not say %q", want)
		}
	}
	for _, flag := range []string{"namespace", "shutdown-delay"} {
		if cmd.Flags().Lookup(flag) == nil {
			t.Errorf("gate has no --%s", flag)
		}
	}
	if f := cmd.Flags().Lookup("shutdown-delay"); f != nil && f.DefValue != "5s" {
		t.Errorf("--shutdown-delay default %s, want 5s", f.DefValue)
	}
}

func TestGateShutdownDelayFlag(t *testing.T) {
	_, line, code := execute(t, "gate", "--shutdown-delay", "-1s")
	if code != exitUsage || !strings.Contains(line, "--shutdown-delay -1s: want a positive duration, or 0 for no delay") {
		t.Errorf("exit %d: %s; want a usage error for a negative --shutdown-delay", code, line)
	}
}
