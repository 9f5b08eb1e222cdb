// Package ci tests the CI recipe rollplan ships: deploy/ci/pr-plan.sh,
// which posts a pull request's plan as a comment, and the GitHub Actions
// workflow that runs it and waits for the rollout after deploying.
package ci

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/rollplan/rollplan/test/harness"
)

// The script runs on this repository's own change scenarios: it posts the
// plan (or why there is none) and exits as rollplan plan does.
func TestPRPlanScript(t *testing.T) {
	bin := harness.RollplanBinary(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	scenario := func(name string) string { return filepath.Join(root, "testdata/scenarios", name) }
	for _, tc := range []struct {
		name     string
		args     []string
		code     int
		inPosted []string
	}{
		{"an image change, in place where it can", []string{scenario("change-deploy-image") + "/snapshot.yaml", scenario("change-deploy-image") + "/change", "--now", "2026-03-01T12:00:00Z", "--kubernetes-version", "v1.36"},
			0, []string{"Deployment", "api", "image"}},
		{"a change the policy denies", []string{scenario("change-sts-freeze-denied") + "/snapshot.yaml", scenario("change-sts-freeze-denied") + "/change", "--now", "2026-02-27T17:00:00Z", "--kubernetes-version", "v1.36", "--policy", filepath.Join(root, "policies/examples/change-freeze")},
			3, []string{"denied", "freeze"}},
		{"a change that cannot be read", []string{scenario("change-deploy-image") + "/snapshot.yaml", filepath.Join(t.TempDir(), "missing.yaml")},
			1, []string{"could not plan this change", "missing.yaml"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			posted := filepath.Join(t.TempDir(), "comment.md")
			cmd := exec.Command("bash", "pr-plan.sh")
			cmd.Args = append(cmd.Args, tc.args...)
			cmd.Env = append(os.Environ(), "ROLLPLAN="+bin, "POST=tee "+posted)
			out, err := cmd.CombinedOutput()
			code := 0
			var x *exec.ExitError
			if errors.As(err, &x) {
				code = x.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.code {
				t.Errorf("exit code %d, want %d\n%s", code, tc.code, out)
			}
			body, err := os.ReadFile(posted)
			if err != nil {
				t.Fatalf("nothing posted: %v\n%s", err, out)
			}
			for _, want := range tc.inPosted {
				if !strings.Contains(string(body), want) {
					t.Errorf("posted comment has no %q:\n%s", want, body)
				}
			}
		})
	}
}

// The workflow is valid YAML whose steps run the shipped script and a
// rollplan status --wait the CLI accepts (it exits 1 on the missing
// cluster, not 2 on its flags).
func TestGitHubActionsWorkflow(t *testing.T) {
	raw, err := os.ReadFile("github-actions.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var wf struct {
		Jobs map[string]struct {
			Steps []struct {
				Run string `json:"run"`
			} `json:"steps"`
		} `json:"jobs"`
	}
	if err := yaml.Unmarshal(raw, &wf); err != nil {
		t.Fatal(err)
	}
	var script, wait bool
	for _, job := range wf.Jobs {
		for _, s := range job.Steps {
			for _, line := range strings.Split(s.Run, "\n") {
				f := strings.Fields(line)
				switch {
				case len(f) > 0 && f[0] == "deploy/ci/pr-plan.sh":
					script = true
				case len(f) > 1 && f[0] == "rollplan" && f[1] == "status":
					wait = true
					cmd := exec.Command(harness.RollplanBinary(t), append(f[1:], "--kubeconfig", filepath.Join(t.TempDir(), "none"))...)
					out, _ := cmd.CombinedOutput()
					if cmd.ProcessState.ExitCode() != 1 || !strings.Contains(string(out), "kubeconfig") {
						t.Errorf("%s: exit code %d, want 1 for the missing kubeconfig (the flags parse):\n%s", line, cmd.ProcessState.ExitCode(), out)
					}
				}
			}
		}
	}
	if !script || !wait {
		t.Errorf("workflow: runs pr-plan.sh %v, waits with rollplan status %v: want both", script, wait)
	}
}
