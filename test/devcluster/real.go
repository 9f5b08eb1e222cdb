package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rollplan/rollplan/test/controlplane"
	"github.com/rollplan/rollplan/test/node"
)

// rollplanTag is the tag of the rollplan image a real node's registry
// serves, built from this checkout.
const rollplanTag = "dev"

// realRequirements says what the host lacks to run a real node, and makes
// $ROLLPLAN_CLUSTER_BIN absolute: the node's processes find each other by
// it (containerd its shim), and none of them runs in this folder.
func realRequirements() error {
	if err := node.Requirements(); err != nil {
		return fmt.Errorf("--node real: %w", err)
	}
	if root := os.Getenv(controlplane.BinEnv); root != "" {
		abs, err := filepath.Abs(root)
		if err != nil {
			return fmt.Errorf("--node real: %s=%s: %w", controlplane.BinEnv, root, err)
		}
		if err := os.Setenv(controlplane.BinEnv, abs); err != nil {
			return err
		}
	}
	if _, err := node.PartsDir(); err != nil {
		return fmt.Errorf("--node real: %w", err)
	}
	return nil
}

// versionLine is what `rollplan version` prints.
var versionLine = regexp.MustCompile(`^rollplan (\S+) \(commit (\S+)\)`)

// rollplanVersion is the version and commit the rollplan binary was
// stamped with: the image is stamped the same, so that the host's
// commands and the pods are one build of one checkout.
func rollplanVersion(ctx context.Context, rollplan string) (version, commit string, err error) {
	out, err := exec.CommandContext(ctx, rollplan, "version").Output()
	if err != nil {
		return "", "", fmt.Errorf("%s version: %w", rollplan, err)
	}
	m := versionLine.FindStringSubmatch(string(out))
	if m == nil {
		return "", "", fmt.Errorf("%s version printed %q, not `rollplan VERSION (commit COMMIT)`", rollplan, out)
	}
	return m[1], m[2], nil
}

// startNode starts the real node, its registry holding the testapp images
// and rollplan's, built from this checkout with the host binary's version.
// The node's processes write their logs to node.log.
func (c *cluster) startNode(ctx context.Context) (err error) {
	version, commit, err := rollplanVersion(ctx, c.opts.rollplan)
	if err != nil {
		return err
	}
	done := c.step(fmt.Sprintf("starting the node: registry (testapp, rollplan:%s built from this checkout), containerd, kubelet, kube-proxy, kube-scheduler", rollplanTag))
	defer func() { done(err) }()
	c.nodeLog = filepath.Join(c.opts.dir, "node.log")
	logFile, err := os.Create(c.nodeLog)
	if err != nil {
		return fmt.Errorf("node log: %w", err)
	}
	c.nodeLogFile = logFile
	c.node, err = node.Start(ctx, c.cp, node.Options{
		Output:   logFile,
		Rollplan: []node.RollplanImage{{Tag: rollplanTag, Version: version, Commit: commit}},
	})
	if err != nil {
		return fmt.Errorf("start the node (its log: %s): %w", c.rel(c.nodeLog), err)
	}
	c.registry = c.node.Registry
	c.rollplanImage = c.node.Image("rollplan:" + rollplanTag)
	return nil
}

// installRollplan installs rollplan as docs/install.md says, from its own
// manifests (`rollplan manifests --image ... | kubectl apply -f -`), and
// waits until the gate answers; then makes the demo namespace.
func (c *cluster) installRollplan(ctx context.Context) (err error) {
	done := c.step(fmt.Sprintf("installing rollplan from its manifests: controller and gate as pods of %s", c.rollplanImage))
	defer func() { done(err) }()
	if err := c.node.Install(ctx, c.opts.rollplan, c.rollplanImage); err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.opts.namespace}}
	if _, err := c.cp.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create namespace %s: %w", c.opts.namespace, err)
	}
	return nil
}

// stopNode stops the node: Stop deletes the webhooks its pods serve,
// drains it, stops its processes and fails if it left anything on the
// host.
func (c *cluster) stopNode() error {
	done := c.step("stopping the node: its pods, then its processes; checking it left nothing on the host")
	err := c.node.Stop()
	done(err)
	if c.nodeLogFile != nil {
		err = errors.Join(err, c.nodeLogFile.Close())
	}
	return err
}

// printRealCluster prints the real node's lines of the ready block.
func (c *cluster) printRealCluster(w io.Writer) {
	n := c.node
	fmt.Fprintf(w, "  node        %s: kubelet, kube-proxy, kube-scheduler, containerd with runc; pods in %s (log %s)\n", n.Name, n.PodCIDR, c.rel(c.nodeLog))
	fmt.Fprintf(w, "              its folder %s goes at Ctrl-C, with everything it made on the host\n", n.Dir())
	fmt.Fprintf(w, "  registry    %s: testapp:1.0 2.0 3.0 (Ready once serving, by its readiness probe),\n", c.registry)
	fmt.Fprintf(w, "              testapp:broken (runs, never Ready), rollplan:%s (this checkout)\n", rollplanTag)
	fmt.Fprintf(w, "  rollplan    installed from its manifests with --image %s:\n", c.rollplanImage)
	fmt.Fprintf(w, "              controller and gate, 2 pods each, in namespace %s\n", node.SystemNamespace)
	fmt.Fprintf(w, "  workloads   namespace %s, every pod running and ready:\n", c.opts.namespace)
	fmt.Fprintf(w, "    StatefulSet %-5s %s  rolled by the rollplan controller: managed, InPlaceIfPossible, max-unavailable 2, OnDelete\n", stsName, pods(stsReplicas))
	fmt.Fprintf(w, "    DaemonSet   %-5s %s   rolled by its controller: RollingUpdate, maxUnavailable 1\n", dsName, pods(1))
	fmt.Fprintf(w, "    Deployment  %-5s %s  rolled by its controller: RollingUpdate, 25%% surge, 25%% unavailable\n", deployName, pods(deployScale))
}
