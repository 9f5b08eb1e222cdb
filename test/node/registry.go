package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// startRegistry builds the pause and testapp binaries and serves their
// images from the registry program on loopback.
func (n *Node) startRegistry(ctx context.Context) error {
	images := filepath.Join(n.dir, "images")
	for _, prog := range []string{"pause", "testapp"} {
		if err := buildStatic(ctx, "./test/node/"+prog, filepath.Join(images, prog)); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	spec := registrySpec{Images: []registryImage{{
		Repository: "pause", Tag: PauseTag,
		Files:      []registryFile{{Path: "/pause", Source: filepath.Join(images, "pause"), Mode: 0o755}},
		Entrypoint: []string{"/pause"},
		User:       "65535:65535",
	}}}
	for _, tag := range Tags {
		spec.Images = append(spec.Images, registryImage{
			Repository: "testapp", Tag: tag,
			Files:      []registryFile{{Path: "/testapp", Source: filepath.Join(images, "testapp"), Mode: 0o755}},
			Entrypoint: []string{"/testapp"},
			Env:        append([]string{"TESTAPP_VERSION=" + tag}, tagEnv[tag]...),
			User:       "65532:65532",
		})
	}
	rollplan, err := n.rollplanSpec(ctx, n.rollplan)
	if err != nil {
		return err
	}
	spec.Images = append(spec.Images, rollplan...)
	b, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	specPath := filepath.Join(images, "spec.json")
	if err := os.WriteFile(specPath, b, 0o644); err != nil {
		return fmt.Errorf("node %s: registry spec: %w", n.Name, err)
	}
	readyPath := filepath.Join(images, "ready.json")
	p, err := n.start("registry", filepath.Join(n.bin, "registry"), []string{"--spec", specPath, "--out", readyPath, "--listen", "127.0.0.1:0"}, nil)
	if err != nil {
		return err
	}
	var ready struct {
		Address string            `json:"address"`
		Digests map[string]string `json:"digests"`
	}
	err = n.waitFor(ctx, p, "registry ready", 60*time.Second, func() (bool, error) {
		b, err := os.ReadFile(readyPath)
		if err != nil {
			return false, err
		}
		return true, json.Unmarshal(b, &ready)
	})
	if err != nil {
		return registryHint(err)
	}
	n.Registry, n.Digests = ready.Address, ready.Digests
	return nil
}

// PauseTag is the pause image's tag in the registry.
const PauseTag = "3.10"

type registrySpec struct {
	Images []registryImage `json:"images"`
}

// registryImage and registryFile are test/node/registry's Image and File.
type registryImage struct {
	Repository string         `json:"repository"`
	Tag        string         `json:"tag"`
	Base       string         `json:"base,omitempty"`
	Files      []registryFile `json:"files"`
	Entrypoint []string       `json:"entrypoint,omitempty"`
	Env        []string       `json:"env,omitempty"`
	User       string         `json:"user,omitempty"`
	WorkingDir string         `json:"workingDir,omitempty"`
}

type registryFile struct {
	Path    string `json:"path"`
	Source  string `json:"source,omitempty"`
	Content string `json:"content,omitempty"`
	Dir     bool   `json:"dir,omitempty"`
	Mode    int64  `json:"mode"`
	UID     int    `json:"uid,omitempty"`
	GID     int    `json:"gid,omitempty"`
}

// buildStatic builds a program of this module as a static binary (images
// have no libc). It runs from the module root, found from this file's
// package directory at test time (the working directory of `go test`).
func buildStatic(ctx context.Context, pkg, out string) error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", out, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build %s: %w: %s", pkg, err, b)
	}
	return nil
}

// moduleRoot is the folder of rollplan's go.mod, above the working
// directory.
func moduleRoot() (string, error) {
	b, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(b))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside rollplan's module: run from its checkout")
	}
	return filepath.Dir(mod), nil
}

// TestappTemplate is a pod template of the testapp image with its
// readiness probe (GET /readyz every second): on the real kubelet a pod is
// Ready when testapp says so; the simulated kubelet ignores probes and
// turns pods Ready by its own rules.
func TestappTemplate(app, image string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{
			// testapp stops at once on SIGTERM: no need to wait 30s.
			TerminationGracePeriodSeconds: ptr.To[int64](5),
			Containers: []corev1.Container{{
				Name:  "app",
				Image: image,
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromString("http")}},
					PeriodSeconds: 1,
				},
			}},
		},
	}
}
