package node_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/rollplan/rollplan/test/node"
)

// TestKustomizeBaseOnRealNode installs rollplan from the kustomize base
// (deploy/) as a user without `rollplan manifests` does: an overlay with
// an image override (kustomize's images:), the gate's TLS Secret and the
// webhooks' caBundle brought by the user (cert-manager's job in the base's
// comments; here taken from `rollplan manifests`, which makes both).
// `kubectl apply -k` brings up the same controller and gate: the API
// server calls the gate, a managed StatefulSet rolls in place through the
// controller, and `kubectl delete -k` takes it all out.
func TestKustomizeBaseOnRealNode(t *testing.T) {
	cp, n := startWith(t, node.Options{Rollplan: []node.RollplanImage{{Tag: "v1", Version: "v0.0.0-node.1"}}})
	ctx := t.Context()
	c := &cluster{t: t, cp: cp, n: n, rollplan: buildRollplan(t)}
	overlay := kustomizeOverlay(t, c, n.Registry+"/rollplan", "v1")
	t.Cleanup(func() {
		ctx := context.Background()
		if _, err := n.Kubectl(ctx, nil, "delete", "validatingwebhookconfiguration", "rollplan-gate", "--ignore-not-found"); err != nil {
			t.Error(err)
		}
		if _, err := n.Kubectl(ctx, nil, "delete", "-k", overlay, "--ignore-not-found", "--wait=false"); err != nil {
			t.Error(err)
		}
	})
	began := time.Now()
	if _, err := n.Kubectl(ctx, nil, "apply", "-k", overlay); err != nil {
		t.Fatal(err)
	}
	if err := n.WaitInstalled(ctx); err != nil {
		c.dumpSystem()
		t.Fatal(err)
	}
	t.Logf("rollplan installed with kubectl apply -k in %v", time.Since(began).Round(time.Millisecond))
	for _, d := range []string{"rollplan-controller", "rollplan-gate"} {
		for _, p := range c.pods(node.SystemNamespace, system(d)) {
			if got, want := p.Spec.Containers[0].Image, n.Image("rollplan:v1"); got != want {
				t.Errorf("pod %s runs %s, want the overlay's image %s", p.Name, got, want)
			}
		}
	}

	if _, err := cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: appsNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w := webSts
	c.create(appsNS, &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: w.name, Namespace: appsNS, Annotations: inPlace(w.budget)},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(int32(w.replicas)), ServiceName: w.name, PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": w.name}},
			Template:       node.TestappTemplate(w.name, n.Image("testapp:1.0")),
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType},
		},
	}, w)
	r := c.roll(w, n.Image("testapp:2.0"), "2.0")
	c.checkInPlace(w, r, 1)
	t.Logf("StatefulSet %s rolled in place through the controller in %v", w.name, r.took.Round(time.Millisecond))

	if _, err := n.Kubectl(ctx, nil, "delete", "validatingwebhookconfiguration", "rollplan-gate"); err != nil {
		t.Fatal(err)
	}
	// The webhook configuration went first (it fails closed): the rest.
	if _, err := n.Kubectl(ctx, nil, "delete", "-k", overlay, "--ignore-not-found"); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := cp.Client.CoreV1().Namespaces().Get(ctx, node.SystemNamespace, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("namespace %s not gone after kubectl delete -k: %v", node.SystemNamespace, err)
	}
}

// kustomizeOverlay writes an overlay over a copy of deploy/ that sets the
// image and brings the gate's TLS Secret and the webhooks' caBundle, and
// returns its folder.
func kustomizeOverlay(t *testing.T, c *cluster, image, tag string) string {
	t.Helper()
	dir := t.TempDir()
	base := filepath.Join(dir, "base")
	if err := os.CopyFS(base, os.DirFS("../../deploy")); err != nil {
		t.Fatalf("copy deploy/: %v", err)
	}
	out, err := exec.CommandContext(t.Context(), c.rollplan, "manifests", "--image", image+":"+tag).Output()
	if err != nil {
		t.Fatalf("rollplan manifests: %v", err)
	}
	var secret string
	var caBundles [][]byte
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(out), -1) {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatalf("rollplan manifests: %v", err)
		}
		switch meta.Kind {
		case "Secret":
			secret = doc
		case "ValidatingWebhookConfiguration":
			var vwc admissionregistrationv1.ValidatingWebhookConfiguration
			if err := yaml.Unmarshal([]byte(doc), &vwc); err != nil {
				t.Fatal(err)
			}
			for _, wh := range vwc.Webhooks {
				caBundles = append(caBundles, wh.ClientConfig.CABundle)
			}
		}
	}
	if secret == "" || len(caBundles) == 0 {
		t.Fatalf("rollplan manifests printed no TLS Secret or no webhook caBundle:\n%s", out)
	}
	var patch strings.Builder
	for i, ca := range caBundles {
		// The patch's value is the bundle's base64, as the API takes it.
		b, err := yaml.Marshal(map[string][]byte{"v": ca})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&patch, "      - op: add\n        path: /webhooks/%d/clientConfig/caBundle\n        value: %s", i, strings.TrimPrefix(string(b), "v: "))
	}
	kustomization := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - ../base
  - gate-tls.yaml
images:
  - name: rollplan
    newName: %s
    newTag: %s
patches:
  - target:
      kind: ValidatingWebhookConfiguration
      name: rollplan-gate
    patch: |-
%s`, image, tag, patch.String())
	overlay := filepath.Join(dir, "overlay")
	if err := os.Mkdir(overlay, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{"kustomization.yaml": kustomization, "gate-tls.yaml": secret} {
		if err := os.WriteFile(filepath.Join(overlay, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return overlay
}
