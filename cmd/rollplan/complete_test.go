package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
)

// completeCluster is a cluster holding Deployment api, StatefulSet web
// and DaemonSet agent in namespace demo (and pods), Deployment other in
// namespace other; the namespace is -n's, else "default". It records the
// --context and --kubeconfig each connection was given.
func completeCluster(t *testing.T) *[]string {
	meta := func(ns, name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: ns, Name: name} }
	objs := []runtime.Object{
		&appsv1.Deployment{ObjectMeta: meta("demo", "api")},
		&appsv1.StatefulSet{ObjectMeta: meta("demo", "web")},
		&appsv1.DaemonSet{ObjectMeta: meta("demo", "agent")},
		&appsv1.Deployment{ObjectMeta: meta("other", "other")},
		&corev1.Pod{ObjectMeta: meta("demo", "web-0")},
		&corev1.Pod{ObjectMeta: meta("demo", "web-1")},
		&corev1.Pod{ObjectMeta: meta("demo", "api-7d9f-x2kq")},
		&corev1.Pod{ObjectMeta: meta("other", "web-9")},
	}
	client := fake.NewClientset(objs...)
	var seen []string
	prev := connectCluster
	t.Cleanup(func() { connectCluster = prev })
	connectCluster = func(k *kubeFlags) (*cluster, error) {
		ns := k.overrides.Context.Namespace
		if ns == "" {
			ns = "default"
		}
		seen = append(seen, fmt.Sprintf("context=%s kubeconfig=%s", k.overrides.CurrentContext, k.rules.ExplicitPath))
		return &cluster{client: client, namespace: ns, source: `context "test"`}, nil
	}
	return &seen
}

// complete runs cobra's __complete, as the shell (and kubectl, through
// kubectl_complete-rollplan) does: the candidates, and the directive.
func complete(t *testing.T, args ...string) ([]string, string) {
	t.Helper()
	cmd := newRootCommand()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(append([]string{"__complete"}, args...))
	if err := cmd.Execute(); err != nil {
		t.Fatalf("__complete %q: %v\n%s", args, err, errOut.String())
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	return lines[:len(lines)-1], lines[len(lines)-1]
}

// KIND/NAME arguments complete from the cluster (-n, --context and
// --kubeconfig as given), for every command that takes one; nothing was
// completed before (cobra offered the files of the working directory).
func TestCompleteWorkloads(t *testing.T) {
	const noFiles, noSpace = ":4", ":6"
	all := "daemonset/agent deployment/api statefulset/web"
	tests := []struct {
		args      []string // after the command
		want      string   // the candidates, space-separated
		directive string
	}{
		{[]string{"-n", "demo", ""}, all, noFiles},
		{[]string{"-n", "demo", "s"}, "statefulset/web", noFiles},
		{[]string{"-n", "demo", "sts"}, "sts/web", noFiles},
		{[]string{"-n", "demo", "statefulset/"}, "statefulset/web", noFiles},
		{[]string{"-n", "demo", "deploy/a"}, "deploy/api", noFiles},
		{[]string{"-n", "demo", "Deployments.apps/"}, "Deployments.apps/api", noFiles},
		{[]string{"-n", "demo", "pods/"}, "", noFiles},
		{[]string{"--namespace=other", ""}, "deployment/other", noFiles},
		// Nothing there: KIND/ first, no space after it.
		{[]string{"-n", "empty", ""}, "deployment/ statefulset/ daemonset/", noSpace},
		{[]string{"-n", "empty", "d"}, "deployment/ daemonset/", noSpace},
		// One workload only.
		{[]string{"-n", "demo", "sts/web", ""}, "", noFiles},
	}
	for _, command := range []string{"status", "apply", "pause", "resume", "undo", "history"} {
		for _, tt := range tests {
			t.Run(command+" "+strings.Join(tt.args, " "), func(t *testing.T) {
				completeCluster(t)
				got, directive := complete(t, append([]string{command}, tt.args...)...)
				if strings.Join(got, " ") != tt.want || directive != tt.directive {
					t.Errorf("offered %q %s, want %q %s", got, directive, tt.want, tt.directive)
				}
			})
		}
	}
	t.Run("snapshot: any number, each once", func(t *testing.T) {
		completeCluster(t)
		got, directive := complete(t, "snapshot", "-n", "demo", "sts/web", "")
		if strings.Join(got, " ") != "daemonset/agent deployment/api" || directive != noFiles {
			t.Errorf("offered %q %s", got, directive)
		}
	})
	t.Run("--context and --kubeconfig reach the connection", func(t *testing.T) {
		seen := completeCluster(t)
		complete(t, "status", "--context", "staging", "--kubeconfig", "/tmp/kc", "-n", "demo", "")
		if len(*seen) != 1 || (*seen)[0] != "context=staging kubeconfig=/tmp/kc" {
			t.Errorf("connected with %q", *seen)
		}
	})
}

// explain completes pods (or with --wave workloads), and plan --workload
// workloads, from the snapshot of -f; explain without -f from the cluster.
func TestCompleteExplainAndPlan(t *testing.T) {
	snap := scenario("sts-inplace-image-only")
	dir := t.TempDir()
	two := filepath.Join(dir, "two.yaml")
	b, err := os.ReadFile(snap)
	if err != nil {
		t.Fatal(err)
	}
	// The same workloads again in namespace prod.
	other := strings.ReplaceAll(string(b), "namespace: default", "namespace: prod")
	if err := os.WriteFile(two, []byte(string(b)+"\n---\n"+other), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"explain", "-f", snap, "web-"}, "web-0 web-1 web-2 web-3"},
		{[]string{"explain", "-f", snap, "default/web-1"}, "default/web-1"},
		{[]string{"explain", "-f", two, "-n", "prod", "web-3"}, "web-3"},
		{[]string{"explain", "-f", two, "prod/web-3"}, "prod/web-3"},
		{[]string{"explain", "-f", snap, "--wave", "2", ""}, "statefulset/web"},
		{[]string{"explain", "-f", snap, "web-1", ""}, ""},
		{[]string{"explain", "-f", "missing.yaml", ""}, ""},
		// Without -f, from the cluster (explain --change previews against it).
		{[]string{"explain", "-n", "demo", "--change", "x.yaml", "web"}, "web-0 web-1"},
		{[]string{"explain", "-n", "demo", "--change", "x.yaml", "--wave", "1", "st"}, "statefulset/web"},
		{[]string{"plan", "-f", snap, "--workload", ""}, "statefulset/web"},
		{[]string{"plan", "-f", two, "--workload", "sts/"}, "sts/default/web sts/prod/web"},
		{[]string{"plan", "-f", two, "-n", "prod", "--workload", ""}, "statefulset/web"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			completeCluster(t)
			got, directive := complete(t, tt.args...)
			if strings.Join(got, " ") != tt.want || directive != ":4" {
				t.Errorf("offered %q %s, want %q :4", got, directive, tt.want)
			}
		})
	}
}
