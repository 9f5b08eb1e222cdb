package node_test

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/rollplan/rollplan/test/controlplane"
	"github.com/rollplan/rollplan/test/node"
)

// start brings up a v1.37 control plane and a real node on it, or skips
// when their binaries are not built; both are stopped at the end of the
// test, the node first, and the test fails if the node left anything on
// the host.
func start(t *testing.T) (*controlplane.ControlPlane, *node.Node) {
	t.Helper()
	return startWith(t, node.Options{})
}

// startWith is start with the node's options.
func startWith(t *testing.T, opts node.Options) (*controlplane.ControlPlane, *node.Node) {
	t.Helper()
	if _, err := controlplane.VersionDir("v1.37"); err != nil {
		t.Skip(err)
	}
	if _, err := node.PartsDir(); err != nil {
		t.Skip(err)
	}
	if err := node.Requirements(); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	began := time.Now()
	cp, err := controlplane.Start(ctx, controlplane.Options{Version: "v1.37", ServePods: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Error(err)
		}
	})
	t.Logf("control plane %s up in %v", cp.ServerVersion, time.Since(began).Round(time.Millisecond))
	began = time.Now()
	n, err := node.Start(ctx, cp, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("node %s Ready in %v (registry %s, pod CIDR %s)", n.Name, time.Since(began).Round(time.Millisecond), n.Registry, n.PodCIDR)
	t.Cleanup(func() {
		if err := stop(t, n); err != nil {
			t.Error(err)
		}
	})
	return cp, n
}

// stop shows the end of the node's logs if the test has failed, while
// they exist, then stops the node.
func stop(t *testing.T, n *node.Node) error {
	if t.Failed() {
		for _, c := range []string{"kubelet", "containerd"} {
			t.Logf("%s's log ends:\n%s", c, n.LogTail(c, 40))
		}
	}
	return n.Stop()
}

// TestImageInPlace: a pod's image changed in its spec is run by the real
// kubelet in the same pod: same UID, the container restarted once, the new
// image's digest, ready again through its real readiness probe, serving
// the new version. Then the node is removed and nothing of it is left.
func TestImageInPlace(t *testing.T) {
	began := time.Now()
	cp, n := start(t)
	ctx := t.Context()
	c := cp.Client

	nd, err := c.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	info := nd.Status.NodeInfo
	if !strings.HasPrefix(info.ContainerRuntimeVersion, "containerd://2.") {
		t.Errorf("node %s: containerRuntimeVersion %q, want containerd://2.x", n.Name, info.ContainerRuntimeVersion)
	}
	if info.KubeletVersion != cp.ServerVersion {
		t.Errorf("node %s: kubeletVersion %q, want the control plane's %s", n.Name, info.KubeletVersion, cp.ServerVersion)
	}

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "inplace"}}
	if _, err := c.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := testappPod("web-0", n.Image("testapp:1.0"))
	phase := time.Now()
	if _, err := c.CoreV1().Pods(ns.Name).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := waitPod(t, cp, ns.Name, pod.Name, "Ready on testapp:1.0", func(p *corev1.Pod) bool {
		return ready(p) && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].Ready
	})
	t.Logf("pod %s Ready on testapp:1.0 in %v (pull, sandbox, probe)", pod.Name, time.Since(phase).Round(time.Millisecond))
	cs := p.Status.ContainerStatuses[0]
	if cs.RestartCount != 0 {
		t.Errorf("pod %s: restartCount %d before any change, want 0", pod.Name, cs.RestartCount)
	}
	if !strings.HasSuffix(cs.ImageID, "@"+n.Digests["testapp:1.0"]) {
		t.Errorf("pod %s: imageID %q, want the digest of testapp:1.0 %s", pod.Name, cs.ImageID, n.Digests["testapp:1.0"])
	}
	if p.Spec.NodeName != n.Name {
		t.Errorf("pod %s on node %q, want %s", pod.Name, p.Spec.NodeName, n.Name)
	}
	if got := get(t, p.Status.PodIP); got != "testapp 1.0\n" {
		t.Errorf("pod %s at %s answers %q, want \"testapp 1.0\\n\"", pod.Name, p.Status.PodIP, got)
	}
	uid, ip := p.UID, p.Status.PodIP

	// Every status the pod goes through from the change on.
	rec := record(t, cp, ns.Name, pod.Name, p.ResourceVersion)
	phase = time.Now()
	patch := fmt.Sprintf(`{"spec":{"containers":[{"name":"app","image":%q}]}}`, n.Image("testapp:2.0"))
	if _, err := c.CoreV1().Pods(ns.Name).Patch(ctx, pod.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	p = waitPod(t, cp, ns.Name, pod.Name, "Ready on testapp:2.0", func(p *corev1.Pod) bool {
		if len(p.Status.ContainerStatuses) != 1 {
			return false
		}
		cs := p.Status.ContainerStatuses[0]
		return ready(p) && cs.Ready && cs.State.Running != nil && strings.HasSuffix(cs.ImageID, "@"+n.Digests["testapp:2.0"])
	})
	t.Logf("pod %s Ready on testapp:2.0 in %v after the change", pod.Name, time.Since(phase).Round(time.Millisecond))
	cs = p.Status.ContainerStatuses[0]
	if p.UID != uid {
		t.Errorf("pod %s: UID %s after the change, want the same pod %s", pod.Name, p.UID, uid)
	}
	if p.Status.PodIP != ip {
		t.Errorf("pod %s: IP %s after the change, want the same sandbox's %s", pod.Name, p.Status.PodIP, ip)
	}
	if cs.RestartCount != 1 {
		t.Errorf("pod %s: restartCount %d after the change, want 1", pod.Name, cs.RestartCount)
	}
	if cs.Image != n.Image("testapp:2.0") {
		t.Errorf("pod %s: status image %q, want %s", pod.Name, cs.Image, n.Image("testapp:2.0"))
	}
	if got := get(t, p.Status.PodIP); got != "testapp 2.0\n" {
		t.Errorf("pod %s answers %q after the change, want \"testapp 2.0\\n\"", pod.Name, got)
	}
	// The kubelet took the pod out of service while its container
	// restarted: Ready went False, then True, through the real probe.
	seen := rec.stop()
	var flips []string
	for _, s := range seen {
		if len(flips) == 0 || flips[len(flips)-1] != s {
			flips = append(flips, s)
		}
	}
	if len(flips) < 2 || !slices.Contains(flips, "Ready=False") || flips[len(flips)-1] != "Ready=True" {
		t.Errorf("pod %s: Ready went %v after the change, want a False then True", pod.Name, flips)
	}
	t.Logf("pod %s after the change: %v", pod.Name, flips)

	// Removing the node: Stop fails if anything is left, and Leftovers
	// says so again afterwards.
	phase = time.Now()
	if err := stop(t, n); err != nil {
		t.Fatal(err)
	}
	if err := n.Leftovers(); err != nil {
		t.Fatal(err)
	}
	t.Logf("node removed, nothing left, in %v; test %v", time.Since(phase).Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
}

// TestServices: a Service's ClusterIP leads to its pods (kube-proxy's
// rules, the EndpointSlice controller), from the host as the apiserver
// calls a webhook; the kubernetes Service leads to the apiserver, which
// presents a certificate for that address signed by the CA every
// namespace's kube-root-ca.crt holds (what an in-cluster client trusts);
// and a pod gets its service-account token mounted (ServiceAccount
// admission, the default account, the kubelet's TokenRequest).
func TestServices(t *testing.T) {
	cp, n := start(t)
	ctx := t.Context()
	c := cp.Client
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "services"}}
	if _, err := c.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := testappPod("web-0", n.Image("testapp:1.0"))
	pod.Spec.AutomountServiceAccountToken = nil
	if _, err := c.CoreV1().Pods(ns.Name).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc, err := c.CoreV1().Services(ns.Name).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "testapp"},
			Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromString("http")}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := waitPod(t, cp, ns.Name, pod.Name, "Ready", ready)
	var token bool
	for _, v := range p.Spec.Volumes {
		if v.Projected != nil && strings.HasPrefix(v.Name, "kube-api-access-") {
			token = true
		}
	}
	if !token {
		t.Errorf("pod %s: no kube-api-access-* volume: the ServiceAccount admission plugin did not mount its token", pod.Name)
	}
	if p.Spec.ServiceAccountName != "default" {
		t.Errorf("pod %s: serviceAccountName %q, want default", pod.Name, p.Spec.ServiceAccountName)
	}

	// The Service, from the host: kube-proxy's rules and its EndpointSlice.
	addr := net.JoinHostPort(svc.Spec.ClusterIP, "80")
	// A new connection each try: until kube-proxy's rules are in, the
	// ClusterIP leads out of the host (here, to a proxy that answers 404),
	// and a kept-alive connection to it would outlive the rules.
	fresh := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	body := eventually(t, "GET http://"+addr, func() (string, error) {
		resp, err := fresh.Get("http://" + addr + "/")
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err == nil && string(b) != "testapp 1.0\n" {
			// Under load the first answers can come before the
			// endpoint settles: retried, the last one is reported.
			err = fmt.Errorf("answered %s %q", resp.Status, b)
		}
		return string(b), err
	})
	if body != "testapp 1.0\n" {
		t.Errorf("Service %s/%s at %s answers %q, want \"testapp 1.0\\n\"", ns.Name, svc.Name, addr, body)
	}

	// The apiserver through the kubernetes Service, verified as an
	// in-cluster client verifies it.
	var caPEM string
	eventually(t, "ConfigMap kube-root-ca.crt in "+ns.Name, func() (string, error) {
		cm, err := c.CoreV1().ConfigMaps(ns.Name).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		caPEM = cm.Data["ca.crt"]
		return caPEM, nil
	})
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(caPEM)) {
		t.Fatalf("kube-root-ca.crt in %s holds no certificate: %q", ns.Name, caPEM)
	}
	kube, err := c.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if kube.Spec.ClusterIP != controlplane.KubernetesServiceIP {
		t.Errorf("Service default/kubernetes: ClusterIP %s, want %s", kube.Spec.ClusterIP, controlplane.KubernetesServiceIP)
	}
	api := "https://" + net.JoinHostPort(kube.Spec.ClusterIP, "443") + "/livez"
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: true}}
	status := eventually(t, "GET "+api, func() (string, error) {
		resp, err := client.Get(api)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		return resp.Status, nil
	})
	// Anonymous requests are refused or allowed /livez depending on the
	// apiserver's flags; either answer proves TLS verified and routed.
	if !strings.HasPrefix(status, "200") && !strings.HasPrefix(status, "401") && !strings.HasPrefix(status, "403") {
		t.Errorf("GET %s: %s, want the apiserver's answer", api, status)
	}
}

// eventually retries get for 30 seconds until it succeeds, and returns
// its result, or fails the test with its last error.
func eventually(t *testing.T, what string, get func() (string, error)) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		v, err := get()
		if err == nil {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v (for 30s)", what, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// testappPod runs image with its readiness probe, under the restricted
// Pod Security profile.
func testappPod(name, image string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "testapp"}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](5),
			AutomountServiceAccountToken:  ptr.To(false),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   ptr.To(true),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name:            "app",
				Image:           image,
				ImagePullPolicy: corev1.PullIfNotPresent,
				Ports:           []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromString("http")}},
					PeriodSeconds: 1,
				},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}
}

func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func waitPod(t *testing.T, cp *controlplane.ControlPlane, ns, name, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	var p *corev1.Pod
	var err error
	for time.Now().Before(deadline) {
		p, err = cp.Client.CoreV1().Pods(ns).Get(t.Context(), name, metav1.GetOptions{})
		if err == nil && cond(p) {
			return p
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("pod %s/%s not %s within 2m: %v", ns, name, what, err)
	}
	t.Fatalf("pod %s/%s not %s within 2m; status: phase %s, conditions %+v, containers %+v", ns, name, what, p.Status.Phase, p.Status.Conditions, p.Status.ContainerStatuses)
	return nil
}

// get fetches / from a pod's IP: the host reaches pods through the bridge.
func get(t *testing.T, ip string) string {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + net.JoinHostPort(ip, "8080") + "/")
	if err != nil {
		t.Errorf("GET / from the pod at %s: %v", ip, err)
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// recorder keeps the Ready condition of every status a pod goes through.
type recorder struct {
	mu   sync.Mutex
	seen []string
	w    watch.Interface
	done chan struct{}
}

func record(t *testing.T, cp *controlplane.ControlPlane, ns, name, rv string) *recorder {
	t.Helper()
	w, err := cp.Client.CoreV1().Pods(ns).Watch(t.Context(), metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: rv})
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{w: w, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			r.mu.Lock()
			r.seen = append(r.seen, fmt.Sprintf("Ready=%v", map[bool]string{true: "True", false: "False"}[ready(p)]))
			r.mu.Unlock()
		}
	}()
	return r
}

func (r *recorder) stop() []string {
	r.w.Stop()
	<-r.done
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.seen...)
}
