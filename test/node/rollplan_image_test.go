package node_test

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/rollplan/rollplan/test/node"
)

// TestRollplanImage: rollplan's own image, built here from the
// repository's Dockerfile and .ko.yaml on the local distroless
// equivalent, is in the node's registry as rollplan:TAG with the config
// the Dockerfile gives and the base's files; it runs on the real node
// under the restricted Pod Security profile with the controller
// Deployment's securityContext, and prints the version it was stamped
// with; two versions are two digests.
func TestRollplanImage(t *testing.T) {
	images := []node.RollplanImage{
		{Tag: "v0.1.0", Version: "v0.1.0", Commit: "0000001"},
		{Tag: "v0.2.0", Version: "v0.2.0", Commit: "0000002"},
	}
	cp, n := startWith(t, node.Options{Rollplan: images})
	ctx := t.Context()
	c := cp.Client

	// The registry: the Dockerfile's config over the base's, the base's
	// layer shared, the files a static binary relies on.
	base := fetchImage(t, n.Registry, node.BaseImage)
	if base.digest != n.Digests[node.BaseImage] {
		t.Errorf("registry serves %s as %s, Digests says %s", node.BaseImage, base.digest, n.Digests[node.BaseImage])
	}
	for _, im := range images {
		ref := "rollplan:" + im.Tag
		got := fetchImage(t, n.Registry, ref)
		if got.digest != n.Digests[ref] {
			t.Errorf("registry serves %s as %s, Digests says %q", ref, got.digest, n.Digests[ref])
		}
		cfg := got.config.Config
		if cfg.User != "65532:65532" || !slices.Equal(cfg.Entrypoint, []string{"/rollplan"}) || cfg.Cmd != nil || cfg.WorkingDir != "/home/nonroot" {
			t.Errorf("%s: config user %q entrypoint %q cmd %q workdir %q; want the Dockerfile's 65532:65532 [/rollplan], no cmd, the base's /home/nonroot", ref, cfg.User, cfg.Entrypoint, cfg.Cmd, cfg.WorkingDir)
		}
		if _, err := os.Stat("/etc/ssl/certs/ca-certificates.crt"); err == nil && !slices.Contains(cfg.Env, "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt") {
			t.Errorf("%s: env %q, want the base's SSL_CERT_FILE", ref, cfg.Env)
		}
		if len(got.layers) != 2 || got.layers[0] != base.layers[0] {
			t.Errorf("%s: layers %v, want the base's %v then the binary's", ref, got.layers, base.layers)
		}
		files := map[string]*tar.Header{}
		for _, l := range got.layers {
			for _, h := range layerEntries(t, n.Registry, "rollplan", l) {
				files[strings.TrimSuffix(strings.TrimPrefix(h.Name, "./"), "/")] = h
			}
		}
		for _, want := range []struct {
			path     string
			mode     int64
			uid, gid int
		}{
			{"rollplan", 0o755, 0, 0},
			{"tmp", 0o1777, 0, 0},
			{"home/nonroot", 0o700, 65532, 65532},
			{"etc/passwd", 0o644, 0, 0},
			{"etc/group", 0o644, 0, 0},
			{"etc/nsswitch.conf", 0o644, 0, 0},
		} {
			h := files[want.path]
			if h == nil {
				t.Errorf("%s: no /%s", ref, want.path)
				continue
			}
			if h.Mode != want.mode || h.Uid != want.uid || h.Gid != want.gid {
				t.Errorf("%s: /%s mode %o owner %d:%d, want %o %d:%d", ref, want.path, h.Mode, h.Uid, h.Gid, want.mode, want.uid, want.gid)
			}
		}
	}
	if a, b := n.Digests["rollplan:"+images[0].Tag], n.Digests["rollplan:"+images[1].Tag]; a == "" || a == b {
		t.Errorf("two versions, digests %q and %q: want two different", a, b)
	}

	// The restricted profile is enforced: a pod that does not meet it is
	// refused, so the pods below meet it.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "rollplan-image", Labels: map[string]string{
		"pod-security.kubernetes.io/enforce":         "restricted",
		"pod-security.kubernetes.io/enforce-version": "latest",
	}}}
	if _, err := c.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	loose := rollplanPod("loose", n.Image("rollplan:"+images[0].Tag), "version")
	loose.Spec.SecurityContext, loose.Spec.Containers[0].SecurityContext = nil, nil
	_, err := c.CoreV1().Pods(ns.Name).Create(ctx, loose, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "violates PodSecurity \"restricted:latest\"") {
		t.Fatalf("a pod without the restricted securityContext in %s: %v, want refused by PodSecurity", ns.Name, err)
	}

	for _, r := range []struct {
		pod, tag string
		args     []string
		exit     int32
		log      string // what it prints, whole
		message  string // in the termination message
	}{
		{"version-1", images[0].Tag, []string{"version"}, 0, "rollplan v0.1.0 (commit 0000001)\n", ""},
		{"version-2", images[1].Tag, []string{"version"}, 0, "rollplan v0.2.0 (commit 0000002)\n", ""},
		// A failing run's output is its termination message
		// (FallbackToLogsOnError): how a crash would show.
		{"usage", images[1].Tag, []string{"version", "extra"}, 2, "", "rollplan version takes no arguments, got extra"},
	} {
		image := n.Image("rollplan:" + r.tag)
		pod := rollplanPod(r.pod, image, r.args...)
		began := time.Now()
		if _, err := c.CoreV1().Pods(ns.Name).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatalf("pod %s: %v", r.pod, err)
		}
		p := waitPod(t, cp, ns.Name, r.pod, "finished", func(p *corev1.Pod) bool {
			return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
		})
		if len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Terminated == nil {
			t.Fatalf("pod %s: %s with container statuses %+v", r.pod, p.Status.Phase, p.Status.ContainerStatuses)
		}
		cs := p.Status.ContainerStatuses[0]
		term := cs.State.Terminated
		t.Logf("pod %s (%s %s): %s in %v, exit %d", r.pod, r.tag, strings.Join(r.args, " "), p.Status.Phase, time.Since(began).Round(time.Millisecond), term.ExitCode)
		if term.ExitCode != r.exit {
			t.Errorf("pod %s: exit code %d (%s: %q), want %d", r.pod, term.ExitCode, term.Reason, term.Message, r.exit)
		}
		if digest := n.Digests["rollplan:"+r.tag]; !strings.HasSuffix(cs.ImageID, "@"+digest) {
			t.Errorf("pod %s: imageID %q, want rollplan:%s's digest %s", r.pod, cs.ImageID, r.tag, digest)
		}
		if r.message != "" && !strings.Contains(term.Message, r.message) {
			t.Errorf("pod %s: termination message %q, want it to hold %q", r.pod, term.Message, r.message)
		}
		if r.log != "" {
			out, err := n.ContainerOutput(ctx, ns.Name, r.pod, "rollplan")
			if err != nil {
				t.Fatal(err)
			}
			if out != r.log {
				t.Errorf("pod %s printed %q, want %q", r.pod, out, r.log)
			}
		}
	}
}

// rollplanPod runs rollplan's image with args once, with the controller
// Deployment's securityContext (deploy/controller-deployment.yaml).
func rollplanPod(name, image string, args ...string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To[int64](5),
			AutomountServiceAccountToken:  ptr.To(false),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   ptr.To(true),
				RunAsUser:      ptr.To[int64](65532),
				RunAsGroup:     ptr.To[int64](65532),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name:                     "rollplan",
				Image:                    image,
				ImagePullPolicy:          corev1.PullIfNotPresent,
				Args:                     args,
				TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false),
					ReadOnlyRootFilesystem:   ptr.To(true),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}
}

// registryImage is what the test reads of an image in the registry.
type registryImage struct {
	digest string
	layers []string // digests
	config struct {
		Config struct {
			User       string   `json:"User"`
			Entrypoint []string `json:"Entrypoint"`
			Cmd        []string `json:"Cmd"`
			Env        []string `json:"Env"`
			WorkingDir string   `json:"WorkingDir"`
		} `json:"config"`
	}
}

// fetchImage reads ref's manifest and config from the registry over the
// OCI distribution API.
func fetchImage(t *testing.T, registry, ref string) registryImage {
	t.Helper()
	repo, tag, _ := strings.Cut(ref, ":")
	body := registryGet(t, fmt.Sprintf("http://%s/v2/%s/manifests/%s", registry, repo, tag), "application/vnd.oci.image.manifest.v1+json")
	sum := sha256.Sum256(body)
	im := registryImage{digest: "sha256:" + hex.EncodeToString(sum[:])}
	var m struct {
		Config struct{ Digest string }   `json:"config"`
		Layers []struct{ Digest string } `json:"layers"`
	}
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("%s: manifest: %v", ref, err)
	}
	for _, l := range m.Layers {
		im.layers = append(im.layers, l.Digest)
	}
	cfg := registryGet(t, fmt.Sprintf("http://%s/v2/%s/blobs/%s", registry, repo, m.Config.Digest), "")
	if err := json.Unmarshal(cfg, &im.config); err != nil {
		t.Fatalf("%s: config: %v", ref, err)
	}
	return im
}

// layerEntries lists a gzipped layer's tar headers.
func layerEntries(t *testing.T, registry, repo, digest string) []*tar.Header {
	t.Helper()
	body := registryGet(t, fmt.Sprintf("http://%s/v2/%s/blobs/%s", registry, repo, digest), "")
	zr, err := gzip.NewReader(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("layer %s: %v", digest, err)
	}
	var out []*tar.Header
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("layer %s: %v", digest, err)
		}
		out = append(out, h)
	}
}

func registryGet(t *testing.T, url, accept string) []byte {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v: %s", url, resp.Status, err, b)
	}
	return b
}
