package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// SystemNamespace is where rollplan's manifests install the controller and
// the gate.
const SystemNamespace = "rollplan-system"

// Install installs rollplan on the node's cluster as a user does, from its
// own manifests: `rollplan manifests --image IMAGE | kubectl apply -f -`,
// with rollplan the host binary (the same source as the image) and kubectl
// the control plane's. It waits until the gate's and the controller's
// Deployments have rolled out, then until the API server calls the gate
// (it reads webhook configurations from an informer). extra are more flags
// for `rollplan manifests` (--policy, --controller-replicas). Run again
// with another image, it upgrades.
func (n *Node) Install(ctx context.Context, rollplan, image string, extra ...string) error {
	manifests, err := command(ctx, rollplan, nil, append([]string{"manifests", "--image", image}, extra...)...)
	if err != nil {
		return fmt.Errorf("install rollplan %s: %w", image, err)
	}
	if _, err := n.Kubectl(ctx, []byte(manifests), "apply", "-f", "-"); err != nil {
		return fmt.Errorf("install rollplan %s: %w", image, err)
	}
	if err := n.WaitInstalled(ctx); err != nil {
		return fmt.Errorf("install rollplan %s: %w", image, err)
	}
	return nil
}

// WaitInstalled waits until rollplan's Deployments have rolled out and
// the API server calls the gate's webhook, however rollplan was applied
// (its manifests, the kustomize base).
func (n *Node) WaitInstalled(ctx context.Context) error {
	for _, d := range []string{"rollplan-gate", "rollplan-controller"} {
		if _, err := n.Kubectl(ctx, nil, "-n", SystemNamespace, "rollout", "status", "deploy/"+d, "--timeout=3m"); err != nil {
			return err
		}
	}
	// The API server reads webhook configurations from an informer: a
	// dry-run create of a StatefulSet (its webhook allows dry runs) until
	// the API server's metrics count a call the gate answered.
	probe := []byte(`{"apiVersion":"apps/v1","kind":"StatefulSet","metadata":{"name":"gate-probe","namespace":"default"},` +
		`"spec":{"selector":{"matchLabels":{"app":"gate-probe"}},"template":{"metadata":{"labels":{"app":"gate-probe"}},` +
		`"spec":{"containers":[{"name":"app","image":"gate-probe"}]}}}}`)
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if _, err := n.Kubectl(ctx, probe, "create", "--dry-run=server", "-f", "-"); err != nil {
			return false, nil
		}
		return n.gateCalled(ctx)
	})
	if err != nil {
		return fmt.Errorf("the API server never called the gate's webhook through Service %s/rollplan-gate: %w", SystemNamespace, err)
	}
	return nil
}

// gateCalled reads the API server's metrics: has it had an answer (HTTP
// 200) from the gate's workloads webhook?
func (n *Node) gateCalled(ctx context.Context) (bool, error) {
	raw, err := n.cp.Client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return false, fmt.Errorf("read the API server's metrics: %w", err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "apiserver_admission_webhook_request_total{") &&
			strings.Contains(line, `name="workloads.gate.rollplan.dev"`) && strings.Contains(line, `code="200"`) {
			return true, nil
		}
	}
	return false, nil
}

// Uninstall removes rollplan as its docs say: the webhook configuration
// first (it fails closed), then every object of the manifests, then the
// controller's per-workload Leases; and waits until the namespace is gone.
func (n *Node) Uninstall(ctx context.Context, rollplan string) error {
	var errs []error
	if _, err := n.Kubectl(ctx, nil, "delete", "validatingwebhookconfiguration", "rollplan-gate", "--ignore-not-found"); err != nil {
		errs = append(errs, err)
	}
	manifests, err := command(ctx, rollplan, nil, "manifests")
	if err != nil {
		return fmt.Errorf("uninstall rollplan: %w", err)
	}
	if _, err := n.Kubectl(ctx, []byte(manifests), "delete", "--ignore-not-found", "--wait=false", "-f", "-"); err != nil {
		errs = append(errs, err)
	}
	if _, err := n.Kubectl(ctx, nil, "delete", "lease", "-A", "-l", "app.kubernetes.io/managed-by=rollplan"); err != nil {
		errs = append(errs, err)
	}
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := n.cp.Client.CoreV1().Namespaces().Get(ctx, SystemNamespace, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		errs = append(errs, fmt.Errorf("namespace %s not gone: %w", SystemNamespace, err))
	}
	if len(errs) > 0 {
		return fmt.Errorf("uninstall rollplan: %w", errors.Join(errs...))
	}
	return nil
}

// Kubectl runs the control plane's kubectl against it as the admin, with
// stdin, and returns its standard output.
func (n *Node) Kubectl(ctx context.Context, stdin []byte, args ...string) (string, error) {
	return command(ctx, filepath.Join(n.k8sBin, "kubectl"), stdin, append([]string{"--kubeconfig", n.cp.Kubeconfig}, args...)...)
}

// command runs a program and returns its standard output, or an error
// quoting the command and its standard error.
func command(ctx context.Context, path string, stdin []byte, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, path, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %w: %s", filepath.Base(path), strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}
