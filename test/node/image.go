package node

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RollplanImage is one rollplan image for the node's registry, built from
// the repository's own definition (loadImageDef) and served as
// Registry+"/rollplan:"+Tag.
type RollplanImage struct {
	Tag string
	// Version and Commit are stamped into the binary (`rollplan version`
	// prints them), as ko's {{.Git.Tag}} and {{.Git.ShortCommit}}; two
	// versions make two images of different digests. An empty Commit is
	// the checkout's short commit, as the Makefile stamps it.
	Version, Commit string
}

// BaseImage is the local equivalent of gcr.io/distroless/static:nonroot in
// the registry, which the rollplan images are built on.
const BaseImage = "base/static:nonroot"

// NonRootUID is distroless's nonroot user (and group), the base's user.
const NonRootUID = 65532

// hostCACerts is Debian's ca-certificates bundle, the file distroless
// takes from the same package.
const hostCACerts = "/etc/ssl/certs/ca-certificates.crt"

// baseImage is gcr.io/distroless/static:nonroot rebuilt from what a static
// Go binary may use of it. Kept from distroless (static/static.bzl and
// common/BUILD.bazel of GoogleContainerTools/distroless): /etc/passwd and
// /etc/group with its users and groups (root, nobody, nonroot 65532, and
// the tty and staff groups), the home directories (/root 0700, /home,
// /home/nonroot 0700 owned by nonroot), /tmp 1777, /etc/nsswitch.conf
// (files first, so that Go's resolver reads /etc/hosts), the CA bundle at
// /etc/ssl/certs/ca-certificates.crt (the host's, when it has one) and the
// config: user 65532, working directory /home/nonroot, its PATH and
// SSL_CERT_FILE. Left out: the Debian packages base-files, netbase
// (/etc/services, /etc/protocols), tzdata and media-types, and
// /etc/os-release: rollplan loads no time zone by name, no MIME type and no
// service name.
func baseImage() (registryImage, error) {
	nonroot := strconv.Itoa(NonRootUID)
	im := registryImage{
		Repository: "base/static", Tag: "nonroot",
		Files: []registryFile{
			{Path: "/etc/passwd", Mode: 0o644, Content: "root:x:0:0:root:/root:/sbin/nologin\n" +
				"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
				"nonroot:x:" + nonroot + ":" + nonroot + ":nonroot:/home/nonroot:/sbin/nologin\n"},
			{Path: "/etc/group", Mode: 0o644, Content: "root:x:0:\nnobody:x:65534:\ntty:x:5:\nstaff:x:50:\nnonroot:x:" + nonroot + ":\n"},
			{Path: "/etc/nsswitch.conf", Mode: 0o644, Content: "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\nnetworks: files\nprotocols: files\nservices: files\n"},
			{Path: "/root", Dir: true, Mode: 0o700},
			{Path: "/home", Dir: true, Mode: 0o755},
			{Path: "/home/nonroot", Dir: true, Mode: 0o700, UID: NonRootUID, GID: NonRootUID},
			{Path: "/tmp", Dir: true, Mode: 0o1777},
		},
		Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		User:       nonroot,
		WorkingDir: "/home/nonroot",
	}
	switch _, err := os.Stat(hostCACerts); {
	case err == nil:
		im.Files = append(im.Files, registryFile{Path: hostCACerts, Source: hostCACerts, Mode: 0o644})
		im.Env = append(im.Env, "SSL_CERT_FILE="+hostCACerts)
	case !os.IsNotExist(err):
		return registryImage{}, fmt.Errorf("base image: CA certificates: %w", err)
	}
	return im, nil
}

// tagPattern is an OCI tag.
var tagPattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$`)

// buildRollplan builds each image's binary into dir the way the
// repository's definition says, checks that it is static, and returns the
// base and the images for the registry's spec.
func buildRollplan(ctx context.Context, dir string, images []RollplanImage) ([]registryImage, error) {
	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	def, err := loadImageDef(root)
	if err != nil {
		return nil, err
	}
	base, err := baseImage()
	if err != nil {
		return nil, err
	}
	out := []registryImage{base}
	seen := map[string]bool{}
	for _, im := range images {
		if !tagPattern.MatchString(im.Tag) || seen[im.Tag] {
			return nil, fmt.Errorf("rollplan image tag %q: a unique OCI tag is required", im.Tag)
		}
		seen[im.Tag] = true
		if im.Version == "" {
			return nil, fmt.Errorf("rollplan image %s: a version is required", im.Tag)
		}
		commit := im.Commit
		if commit == "" {
			commit = shortCommit(root)
		}
		bin := filepath.Join(dir, "rollplan-"+im.Tag)
		if err := def.build(ctx, root, bin, im.Version, commit); err != nil {
			return nil, fmt.Errorf("rollplan image %s: %w", im.Tag, err)
		}
		out = append(out, registryImage{
			Repository: "rollplan", Tag: im.Tag, Base: BaseImage,
			Files:      []registryFile{{Path: def.Binary, Source: bin, Mode: 0o755}},
			Entrypoint: def.Entrypoint,
			User:       def.User,
		})
	}
	return out, nil
}

// build runs go build as .ko.yaml says, in root, into out, and checks that
// the binary is static.
func (d imageDef) build(ctx context.Context, root, out, version, commit string) error {
	ldflags, err := d.ldflags(version, commit)
	if err != nil {
		return err
	}
	args := append([]string{"build"}, d.Flags...)
	args = append(args, "-ldflags", ldflags, "-o", out, d.Main)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), d.Env...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %w: %s", strings.Join(args, " "), err, b)
	}
	return staticELF(out)
}

// shortCommit is the checkout's commit as the Makefile stamps it, or
// "unknown" outside a git checkout.
func shortCommit(root string) string {
	cmd := exec.Command("git", "rev-parse", "--short", "HEAD")
	cmd.Dir = root
	b, err := cmd.Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}

// rollplanSpec is what startRegistry adds to its spec for opts.Rollplan:
// nothing if none is asked for.
func (n *Node) rollplanSpec(ctx context.Context, images []RollplanImage) ([]registryImage, error) {
	if len(images) == 0 {
		return nil, nil
	}
	ims, err := buildRollplan(ctx, filepath.Join(n.dir, "images"), images)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", n.Name, err)
	}
	return ims, nil
}

// registryHint adds to the registry's failure what to do when its binary
// predates the spec this package writes.
func registryHint(err error) error {
	if err != nil && strings.Contains(err.Error(), "unknown field") {
		return fmt.Errorf("%w\n(the registry binary is older than test/node/registry: run `make node-bin`)", err)
	}
	return err
}

// ContainerOutput is exactly what a container of a pod on the node wrote
// to stdout and stderr in its last run, the CRI log framing (time, stream,
// partial-line tag) taken off, for a test to compare; ContainerLog is the
// raw tail for a failure message. The test control plane gives the
// apiserver no kubelet client certificate, so `kubectl logs` cannot reach
// the kubelet.
func (n *Node) ContainerOutput(ctx context.Context, namespace, pod, container string) (string, error) {
	p, err := n.cp.Client.CoreV1().Pods(namespace).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("pod %s/%s: %w", namespace, pod, err)
	}
	restarts := -1
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == container {
			restarts = int(cs.RestartCount)
		}
	}
	if restarts < 0 {
		return "", fmt.Errorf("pod %s/%s: no status of container %s yet", namespace, pod, container)
	}
	path := filepath.Join(n.dir, "pod-logs", namespace+"_"+pod+"_"+string(p.UID), container, strconv.Itoa(restarts)+".log")
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("pod %s/%s container %s: %w", namespace, pod, container, err)
	}
	defer f.Close()
	// The CRI log format: TIME STREAM P|F CONTENT, P a partial line.
	var b strings.Builder
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.SplitN(sc.Text(), " ", 4)
		if len(fields) < 3 {
			return "", fmt.Errorf("%s: not a CRI log line: %q", path, sc.Text())
		}
		if len(fields) == 4 {
			b.WriteString(fields[3])
		}
		if fields[2] == "F" {
			b.WriteByte('\n')
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return b.String(), nil
}
