package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rollplan/rollplan/test/harness"
)

// `kubectl rollplan status -n NS <TAB>` completes the namespace's
// workloads: kubectl runs deploy/kubectl_complete-rollplan from PATH (as
// `make install` lays it out, beside rollplan and kubectl-rollplan),
// which asks rollplan __complete, which lists them from the cluster.
func TestKubectlPluginCompletion(t *testing.T) {
	e := newEnv(t, 1)
	if _, err := e.client.AppsV1().StatefulSets(e.ns).Create(e.ctx, statefulSet(e.ns, "web", 1, "1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.AppsV1().Deployments(e.ns).Create(e.ctx, managedDeployment(e.ns, "api", 1, "1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	script, err := os.ReadFile("../../deploy/kubectl_complete-rollplan")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "kubectl_complete-rollplan"), script, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"rollplan", "kubectl-rollplan"} {
		if err := os.Symlink(harness.RollplanBinary(t), filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	cp := harness.Cluster(t)
	env := append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "KUBECONFIG="+cp.Kubeconfig)
	run := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(e.ctx, name, args...)
		cmd.Env = env
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	want := "deployment/api\nstatefulset/web\n:4\n"
	if out := run(filepath.Join(bin, "kubectl_complete-rollplan"), "status", "-n", e.ns, ""); out != want {
		t.Errorf("kubectl_complete-rollplan status -n %s \"\": %q, want %q", e.ns, out, want)
	}
	// kubectl itself, as the shell's kubectl completion calls it.
	if out := run(filepath.Join(cp.BinDir, "kubectl"), "__complete", "rollplan", "status", "-n", e.ns, "st"); out != "statefulset/web\n:4\n" {
		t.Errorf("kubectl __complete rollplan status -n %s st: %q, want statefulset/web", e.ns, out)
	}
}
