package node

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rollplan/rollplan/test/controlplane"
)

// startKubelet gives the kubelet its identity (system:node:NAME, bound to
// the system:node role: the test apiserver has no Node authorizer) and
// starts it.
func (n *Node) startKubelet(ctx context.Context) error {
	kc, err := n.cp.AddUser("system:node:"+n.Name, "system:nodes")
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(n.dir, "kubelet.kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	_, err = n.cp.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: n.binding},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "system:node"},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "system:node:" + n.Name}},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("node %s: bind system:node: %w", n.Name, err)
	}
	ip, err := controlplane.HostIP()
	if err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	healthz, err := freePort()
	if err != nil {
		return err
	}
	d := n.dir
	// Eviction and image GC thresholds are off: a shared test machine's
	// disk must not evict the test's pods. The kubelet's own API trusts
	// the apiserver's client CA only.
	cfg := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /%s
cgroupsPerQOS: true
containerRuntimeEndpoint: unix://%s
address: %s
port: %d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
staticPodPath: ""
podLogsDir: %s
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: false
  x509:
    clientCAFile: %s
authorization:
  mode: AlwaysAllow
evictionHard:
  memory.available: "0%%"
  nodefs.available: "0%%"
  nodefs.inodesFree: "0%%"
  imagefs.available: "0%%"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
failSwapOn: false
resolvConf: ""
serializeImagePulls: false
nodeStatusUpdateFrequency: 2s
syncFrequency: 10s
fileCheckFrequency: 10s
`, n.cgroupName, n.containerdSocket(), ip, port, healthz, filepath.Join(d, "pod-logs"), n.cp.ClientCAFile())
	cfgPath := filepath.Join(d, "kubelet.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return fmt.Errorf("node %s: kubelet config: %w", n.Name, err)
	}
	p, err := n.start("kubelet", filepath.Join(n.k8sBin, "kubelet"), []string{
		"--config=" + cfgPath,
		"--kubeconfig=" + kubeconfig,
		"--root-dir=" + filepath.Join(d, "kubelet"),
		"--hostname-override=" + n.Name,
		"--node-ip=" + ip,
		"--v=2",
	}, nil)
	if err != nil {
		return err
	}
	return n.waitFor(ctx, p, "node "+n.Name+" registered", 90*time.Second, func() (bool, error) {
		_, err := n.cp.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		return err == nil, err
	})
}

// startProxy runs kube-proxy in iptables mode as system:kube-proxy (its
// bootstrap RBAC role): Services' ClusterIPs lead to their pods, from pods
// and from the host (the apiserver calls the gate's webhook through its
// Service). It is told to leave the host's conntrack settings and
// route_localnet alone (clean.go checks that it did).
func (n *Node) startProxy(ctx context.Context) error {
	kc, err := n.cp.AddUser("system:kube-proxy")
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(n.dir, "kube-proxy.kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	healthz, err := freePort()
	if err != nil {
		return err
	}
	metrics, err := freePort()
	if err != nil {
		return err
	}
	cfg := fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %s
hostnameOverride: %s
mode: iptables
clusterCIDR: %s
detectLocalMode: ClusterCIDR
healthzBindAddress: 127.0.0.1:%d
metricsBindAddress: 127.0.0.1:%d
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
iptables:
  localhostNodePorts: false
  minSyncPeriod: 100ms
`, kubeconfig, n.Name, n.PodCIDR, healthz, metrics)
	cfgPath := filepath.Join(n.dir, "kube-proxy.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return fmt.Errorf("node %s: kube-proxy config: %w", n.Name, err)
	}
	p, err := n.start("kube-proxy", filepath.Join(n.k8sBin, "kube-proxy"), []string{"--config=" + cfgPath, "--v=2"}, nil)
	if err != nil {
		return err
	}
	client := &http.Client{Timeout: 2 * time.Second}
	return n.waitFor(ctx, p, "kube-proxy healthy", 60*time.Second, func() (bool, error) {
		resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", healthz))
		if err != nil {
			return false, err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false, fmt.Errorf("healthz: %s", resp.Status)
		}
		return true, nil
	})
}

// startScheduler runs kube-scheduler as system:kube-scheduler (its
// bootstrap RBAC role).
func (n *Node) startScheduler(ctx context.Context) error {
	kc, err := n.cp.AddUser("system:kube-scheduler")
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(n.dir, "scheduler.kubeconfig")
	if err := os.WriteFile(kubeconfig, kc, 0o600); err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	p, err := n.start("kube-scheduler", filepath.Join(n.k8sBin, "kube-scheduler"), []string{
		"--kubeconfig=" + kubeconfig,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(n.dir, "scheduler-certs"),
		"--v=2",
	}, nil)
	if err != nil {
		return err
	}
	// Up once it has its informers: no port check needed, a scheduled pod
	// is the proof; here only that it did not exit at once.
	time.Sleep(500 * time.Millisecond)
	return n.exited(p)
}

// waitReady waits for the node's Ready condition, then takes off the
// not-ready taint the kubelet registers with, as kube-controller-manager's
// node lifecycle controller would: the test control plane does not run it
// (it would mark the simulated kubelet's nodes NotReady).
func (n *Node) waitReady(ctx context.Context) error {
	var kubelet *process
	for _, p := range n.procs {
		if p.name == "kubelet" {
			kubelet = p
		}
	}
	err := n.waitFor(ctx, kubelet, "node "+n.Name+" Ready", 120*time.Second, func() (bool, error) {
		node, err := n.cp.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				if c.Status == corev1.ConditionTrue {
					return true, nil
				}
				return false, fmt.Errorf("condition Ready=%s: %s", c.Status, c.Message)
			}
		}
		return false, errors.New("no Ready condition yet")
	})
	if err != nil {
		return err
	}
	return n.waitFor(ctx, kubelet, "node "+n.Name+" untainted", 30*time.Second, func() (bool, error) {
		node, err := n.cp.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		kept := node.Spec.Taints[:0]
		for _, t := range node.Spec.Taints {
			if t.Key != corev1.TaintNodeNotReady {
				kept = append(kept, t)
			}
		}
		if len(kept) == len(node.Spec.Taints) {
			return true, nil
		}
		node.Spec.Taints = kept
		// A conflict (the kubelet updated it) is retried.
		_, err = n.cp.Client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
		return false, err
	})
}
