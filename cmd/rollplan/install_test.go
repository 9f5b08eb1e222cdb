package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// `make install` with a packager's DESTDIR and PREFIX puts rollplan, the
// kubectl-rollplan link and kubectl's completion script in
// DESTDIR/PREFIX/bin; run through the link, the help says
// `kubectl rollplan`; `make uninstall` removes all three. The build is the
// Makefile's own (cached by go after the first run).
func TestMakeInstallKubectlPlugin(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make not on PATH")
	}
	dest := t.TempDir()
	bin := filepath.Join(dest, "usr", "bin")
	if out, err := exec.Command("make", "-s", "install", "DESTDIR="+dest, "PREFIX=/usr").CombinedOutput(); err != nil {
		t.Fatalf("make install: %v\n%s", err, out)
	}
	if fi, err := os.Stat(filepath.Join(bin, "rollplan")); err != nil || fi.Mode()&0o111 == 0 {
		t.Fatalf("make install: %s/rollplan not an executable: %v", bin, err)
	}
	// Relative, so that the link survives DESTDIR being a staging root.
	if target, err := os.Readlink(filepath.Join(bin, "kubectl-rollplan")); err != nil || target != "rollplan" {
		t.Fatalf("make install: kubectl-rollplan: link to %q (%v), want a link to rollplan", target, err)
	}

	help := func(name string, args ...string) string {
		t.Helper()
		out, err := exec.Command(filepath.Join(bin, name), args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	out := help("kubectl-rollplan", "--help")
	if !strings.Contains(out, "Usage:\n  kubectl rollplan [flags]") || !strings.Contains(out, `Use "kubectl rollplan [command] --help"`) {
		t.Errorf("kubectl-rollplan --help does not name `kubectl rollplan`:\n%s", out)
	}
	out = help("kubectl-rollplan", "plan", "--help")
	if !strings.Contains(out, "\n  kubectl rollplan plan -f ") || regexp.MustCompile(`(?m)^\s*rollplan `).MatchString(out) {
		t.Errorf("kubectl-rollplan plan --help: usage or examples without `kubectl`:\n%s", out)
	}
	if out := help("rollplan", "plan", "--help"); strings.Contains(out, "kubectl rollplan") {
		t.Errorf("rollplan plan --help names `kubectl rollplan`:\n%s", out)
	}

	// kubectl runs the completion script with the words after `kubectl
	// rollplan`; it finds rollplan on PATH.
	complete := exec.Command(filepath.Join(bin, "kubectl_complete-rollplan"), "pl")
	complete.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	if out, err := complete.Output(); err != nil || !strings.HasPrefix(string(out), "plan\t") {
		t.Errorf("kubectl_complete-rollplan pl: %v, printed %q; want plan first", err, out)
	}

	if out, err := exec.Command("make", "-s", "uninstall", "DESTDIR="+dest, "PREFIX=/usr").CombinedOutput(); err != nil {
		t.Fatalf("make uninstall: %v\n%s", err, out)
	}
	if left, _ := os.ReadDir(bin); len(left) != 0 {
		t.Errorf("make uninstall left %d files in %s: %v", len(left), bin, left)
	}
}

// Started as kubectl-rollplan (by any path), every usage line, hint and
// example says `kubectl rollplan`; paths that contain rollplan stay.
func TestNameFromArgv0(t *testing.T) {
	root := newRootCommand()
	nameFromArgv0(root, "/home/me/.krew/bin/kubectl-rollplan")
	snapshot, _, _ := root.Find([]string{"snapshot"})
	if want := "kubectl rollplan snapshot"; snapshot.CommandPath() != want {
		t.Errorf("CommandPath %q, want %q", snapshot.CommandPath(), want)
	}
	if !strings.Contains(snapshot.Example, "  kubectl rollplan snapshot -n prod > snap.yaml && kubectl rollplan plan -f snap.yaml") {
		t.Errorf("snapshot example:\n%s", snapshot.Example)
	}
	gate, _, _ := root.Find([]string{"gate"})
	if !strings.Contains(gate.Example, "kubectl rollplan gate --tls-cert-file /etc/rollplan/tls/tls.crt") {
		t.Errorf("gate example:\n%s", gate.Example)
	}

	plain := newRootCommand()
	nameFromArgv0(plain, "/usr/local/bin/rollplan")
	if p, _, _ := plain.Find([]string{"snapshot"}); p.CommandPath() != "rollplan snapshot" || strings.Contains(p.Example, "kubectl rollplan") {
		t.Errorf("started as rollplan: %q, example:\n%s", p.CommandPath(), p.Example)
	}
}

// The krew manifest template is a krew Plugin whose platforms cover
// linux and darwin on amd64 and arm64, each installing kubectl-rollplan,
// with the release's placeholders where the release fills them.
func TestKrewManifest(t *testing.T) {
	const path = "deploy/krew/rollplan.yaml"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec struct {
			Version          string `json:"version"`
			Homepage         string `json:"homepage"`
			ShortDescription string `json:"shortDescription"`
			Description      string `json:"description"`
			Caveats          string `json:"caveats"`
			Platforms        []struct {
				Selector struct {
					MatchLabels map[string]string `json:"matchLabels"`
				} `json:"selector"`
				URI    string `json:"uri"`
				SHA256 string `json:"sha256"`
				Files  []struct {
					From string `json:"from"`
					To   string `json:"to"`
				} `json:"files"`
				Bin string `json:"bin"`
			} `json:"platforms"`
		} `json:"spec"`
	}
	if err := yaml.UnmarshalStrict(b, &m); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if m.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || m.Kind != "Plugin" || m.Metadata.Name != "rollplan" || m.Spec.ShortDescription == "" {
		t.Errorf("%s: %s %s %q, want a krew v1alpha2 Plugin named rollplan with a shortDescription", path, m.APIVersion, m.Kind, m.Metadata.Name)
	}
	seen := map[string]bool{}
	for i, p := range m.Spec.Platforms {
		osArch := p.Selector.MatchLabels["os"] + "/" + p.Selector.MatchLabels["arch"]
		seen[osArch] = true
		if p.Bin != "kubectl-rollplan" || len(p.Files) == 0 || p.Files[0].From != p.Bin {
			t.Errorf("%s: platforms[%d] (%s): bin %q, files %v; want bin kubectl-rollplan, taken from the archive", path, i, osArch, p.Bin, p.Files)
		}
		suffix := strings.ReplaceAll(osArch, "/", "_")
		if !strings.Contains(p.URI, "RELEASE_TAG") || !strings.HasSuffix(p.URI, "_"+suffix+".tar.gz") || p.SHA256 != "RELEASE_SHA256_"+strings.ToUpper(suffix) {
			t.Errorf("%s: platforms[%d] (%s): uri %q, sha256 %q; want the release's placeholders for %s", path, i, osArch, p.URI, p.SHA256, osArch)
		}
	}
	for _, want := range []string{"linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64"} {
		if !seen[want] {
			t.Errorf("%s: no platform %s", path, want)
		}
	}
}

// The image: the Dockerfile builds ./cmd/rollplan statically and its final
// stage runs it as the non-root user the manifests' runAsUser names; ko
// builds the same package on the same base. (Text checks: no Docker engine
// or ko runs in the tests.)
func TestImageBuildFiles(t *testing.T) {
	b, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	stages := regexp.MustCompile(`(?m)^FROM `).Split(string(b), -1)
	final := stages[len(stages)-1]
	var build string
	for _, s := range stages {
		if strings.Contains(s, "go build") {
			build = s
		}
	}
	for _, c := range []struct {
		text, want, what string
	}{
		{build, "CGO_ENABLED=0 go build -trimpath", "a static, trimmed build"},
		{build, "./cmd/rollplan", "the rollplan command"},
		{final, "USER 65532:65532", "the final stage's non-root user (the manifests' runAsUser)"},
		{final, `ENTRYPOINT ["/rollplan"]`, "rollplan as the entrypoint (the manifests pass only args)"},
	} {
		if !strings.Contains(c.text, c.want) {
			t.Errorf("Dockerfile: no %q: want %s", c.want, c.what)
		}
	}
	if !regexp.MustCompile(`^(gcr\.io/distroless/static(:nonroot)?|scratch)\b`).MatchString(final) {
		t.Errorf("Dockerfile: final stage FROM %q, want distroless static or scratch", strings.SplitN(final, "\n", 2)[0])
	}

	b, err = os.ReadFile(".ko.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var ko struct {
		DefaultBaseImage string `json:"defaultBaseImage"`
		Builds           []struct {
			Main  string   `json:"main"`
			Env   []string `json:"env"`
			Flags []string `json:"flags"`
		} `json:"builds"`
	}
	if err := yaml.Unmarshal(b, &ko); err != nil {
		t.Fatalf(".ko.yaml: %v", err)
	}
	if ko.DefaultBaseImage != "gcr.io/distroless/static:nonroot" || len(ko.Builds) != 1 || ko.Builds[0].Main != "./cmd/rollplan" || !strings.Contains(strings.Join(ko.Builds[0].Flags, " "), "-trimpath") {
		t.Errorf(".ko.yaml: base %q, builds %+v; want ./cmd/rollplan with -trimpath on distroless static:nonroot", ko.DefaultBaseImage, ko.Builds)
	}
}
