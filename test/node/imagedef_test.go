package node

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func readRoot(t *testing.T) (root, dockerfileText, koText string) {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	d, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	k, err := os.ReadFile(filepath.Join(root, ".ko.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return root, string(d), string(k)
}

// The Dockerfile and .ko.yaml build the same image: the same package, a
// static binary, -trimpath, the same version stamping, the same base, and
// the Dockerfile's user is the base's nonroot, which the base built here
// runs as (what ko's image runs as: ko keeps its base's user).
func TestImageDefinitionsAgree(t *testing.T) {
	root, _, _ := readRoot(t)
	ko, err := readKo(filepath.Join(root, ".ko.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	df, err := readDockerfile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	final, err := df.final()
	if err != nil {
		t.Fatal(err)
	}
	const version, commit = "v9.8.7", "abc1234"
	docker, err := df.goBuildWith(final.BuildStage, map[string]string{"VERSION": version, "COMMIT": commit})
	if err != nil {
		t.Fatal(err)
	}
	kb := ko.Build

	if kb.Main.Value != docker.Main {
		t.Errorf(".ko.yaml builds %s, the Dockerfile %s", kb.Main.Value, docker.Main)
	}
	if !slices.Contains(values(kb.Env), "CGO_ENABLED=0") || docker.Env["CGO_ENABLED"] != "0" {
		t.Errorf("CGO_ENABLED: .ko.yaml env %v, the Dockerfile %v; both must build static (CGO_ENABLED=0)", values(kb.Env), docker.Env)
	}
	if !slices.Contains(values(kb.Flags), "-trimpath") || !slices.Contains(docker.Flags, "-trimpath") {
		t.Errorf("-trimpath: .ko.yaml flags %v, the Dockerfile %v; both must pass it", values(kb.Flags), docker.Flags)
	}
	def := imageDef{Ldflags: kb.ldflags}
	koLd, err := def.ldflags(version, commit)
	if err != nil {
		t.Fatal(err)
	}
	dockerLd, err := imageDef{Ldflags: docker.Ldflags}.ldflags(version, commit)
	if err != nil {
		t.Fatal(err)
	}
	if koLd != dockerLd {
		t.Errorf("stamped with %s and %s: .ko.yaml links %q, the Dockerfile %q", version, commit, koLd, dockerLd)
	}
	if want := "-X main.version=" + version + " -X main.commit=" + commit; koLd != want {
		t.Errorf(".ko.yaml links %q, want %q (the Makefile's stamping)", koLd, want)
	}
	if ko.Base.Value != DistrolessStatic || df.stages[len(df.stages)-1].From != DistrolessStatic {
		t.Errorf("bases: .ko.yaml %s, the Dockerfile %s; want both %s", ko.Base.Value, df.stages[len(df.stages)-1].From, DistrolessStatic)
	}

	base, err := baseImage()
	if err != nil {
		t.Fatal(err)
	}
	uid, _, _ := strings.Cut(final.User, ":")
	if uid != base.User {
		t.Errorf("the Dockerfile's USER %s, the base's user (ko's image's) %s", final.User, base.User)
	}
	if final.User != "65532:65532" {
		t.Errorf("the Dockerfile's USER %s, want distroless's nonroot 65532:65532 (deploy/'s runAsUser)", final.User)
	}
	var passwd, group string
	dirs := map[string]registryFile{}
	for _, f := range base.Files {
		switch {
		case f.Path == "/etc/passwd":
			passwd = f.Content
		case f.Path == "/etc/group":
			group = f.Content
		case f.Dir:
			dirs[f.Path] = f
		}
	}
	if !strings.Contains(passwd, "\nnonroot:x:65532:65532:nonroot:/home/nonroot:") {
		t.Errorf("base /etc/passwd has no nonroot 65532 at /home/nonroot:\n%s", passwd)
	}
	if !strings.HasPrefix(passwd, "root:x:0:0:") || !strings.HasPrefix(group, "root:x:0:") || !strings.Contains(group, "\nnonroot:x:65532:") {
		t.Errorf("base /etc/passwd or /etc/group lacks root or nonroot:\n%s\n%s", passwd, group)
	}
	if h := dirs["/home/nonroot"]; h.UID != 65532 || h.GID != 65532 {
		t.Errorf("base /home/nonroot owned by %d:%d, want 65532:65532", h.UID, h.GID)
	}
	if tmp := dirs["/tmp"]; tmp.Mode != 0o1777 {
		t.Errorf("base /tmp mode %o, want 1777", tmp.Mode)
	}
}

// What the builder reads of the real files, and an edit it does not
// understand to either fails naming the file and the line.
func TestImageDefinitionEdits(t *testing.T) {
	root, dockerText, koText := readRoot(t)
	def, err := loadImageDef(root)
	if err != nil {
		t.Fatal(err)
	}
	if def.Main != "./cmd/rollplan" || def.Binary != "/rollplan" || def.User != "65532:65532" ||
		!slices.Equal(def.Entrypoint, []string{"/rollplan"}) || !slices.Equal(def.Env, []string{"CGO_ENABLED=0"}) || !slices.Equal(def.Flags, []string{"-trimpath"}) {
		t.Errorf("image definition %+v", def)
	}

	// lineOf is the 1-based number of the first line holding s.
	lineOf := func(text, s string) string {
		for i, l := range strings.Split(text, "\n") {
			if strings.Contains(l, s) {
				return strconv.Itoa(i + 1)
			}
		}
		t.Fatalf("%q not in the file", s)
		return ""
	}
	for _, c := range []struct {
		name, file, old, new string
		want                 string // a regexp, after "FILE:LINE: "
		line                 string // the text whose line the error names
	}{
		{"Dockerfile: another base", "Dockerfile", "FROM gcr.io/distroless/static:nonroot", "FROM alpine:3", `FROM alpine:3: the image builder \(test/node\) builds only gcr.io/distroless/static:nonroot`, "FROM alpine:3"},
		{"Dockerfile: an instruction it does not know", "Dockerfile", "USER 65532:65532", "USER 65532:65532\nHEALTHCHECK NONE", `HEALTHCHECK: not understood`, "HEALTHCHECK"},
		{"Dockerfile: a final-stage instruction it does not apply", "Dockerfile", "USER 65532:65532", "USER 65532:65532\nWORKDIR /data", `WORKDIR in the final stage: not understood`, "WORKDIR /data"},
		{"Dockerfile: a user by name", "Dockerfile", "USER 65532:65532", "USER nonroot", `USER nonroot: a numeric UID\[:GID\] is required`, "USER nonroot"},
		{"Dockerfile: COPY with --chown", "Dockerfile", "COPY --from=build /out/rollplan /rollplan", "COPY --from=build --chown=1:1 /out/rollplan /rollplan", `understands only COPY --from=STAGE SRC DST`, "--chown"},
		{"Dockerfile: COPY of another file", "Dockerfile", "COPY --from=build /out/rollplan /rollplan", "COPY --from=build /out/other /rollplan", `COPY /out/other: the stage build builds /out/rollplan`, "/out/other"},
		{"Dockerfile: shell-form ENTRYPOINT", "Dockerfile", `ENTRYPOINT ["/rollplan"]`, `ENTRYPOINT /rollplan`, `the exec form`, "ENTRYPOINT /rollplan"},
		{"Dockerfile: a go build flag it does not know", "Dockerfile", "go build -trimpath", "go build -race -trimpath", `go build -race: the image builder understands only`, "RUN CGO_ENABLED=0"},
		{"Dockerfile: a second command in the RUN", "Dockerfile", "./cmd/rollplan", "./cmd/rollplan && strip /out/rollplan", `the parser reads one simple command only`, "RUN CGO_ENABLED=0"},
		{"Dockerfile: an ARG that is not there", "Dockerfile", "main.commit=${COMMIT}", "main.commit=${GIT_COMMIT}", `\$GIT_COMMIT: not an ARG of the stage`, "RUN CGO_ENABLED=0"},
		{"Dockerfile: linker flags besides -X", "Dockerfile", `-ldflags "-X`, `-ldflags "-s -X`, `understands only -X`, "RUN CGO_ENABLED=0"},
		{".ko.yaml: another base", ".ko.yaml", "defaultBaseImage: gcr.io/distroless/static:nonroot", "defaultBaseImage: cgr.dev/chainguard/static", `defaultBaseImage cgr.dev/chainguard/static: the image builder`, "defaultBaseImage"},
		{".ko.yaml: a key it does not know", ".ko.yaml", "    main: ./cmd/rollplan", "    main: ./cmd/rollplan\n    dir: ./cmd", `field dir not found`, "dir: ./cmd"},
		{".ko.yaml: not YAML", ".ko.yaml", "builds:", "builds: [", `did not find expected`, ""},
		{".ko.yaml: a flag it does not pass", ".ko.yaml", "      - -trimpath", "      - -trimpath\n      - -tags=netgo", `flag "-tags=netgo": the image builder`, "-tags=netgo"},
		{".ko.yaml: a template it cannot fill", ".ko.yaml", "{{.Git.ShortCommit}}", "{{.Git.FullCommit}}", `can't evaluate field FullCommit`, "FullCommit"},
		{".ko.yaml: an env entry that is not KEY=VALUE", ".ko.yaml", "- CGO_ENABLED=0", "- CGO_ENABLED", `env "CGO_ENABLED": KEY=VALUE is required`, "- CGO_ENABLED"},
		{".ko.yaml: a second build", ".ko.yaml", "builds:\n", "builds:\n  - id: other\n    main: ./cmd/other\n", `2 builds: the image builder \(test/node\) builds exactly one`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			files := map[string]string{"Dockerfile": dockerText, ".ko.yaml": koText}
			if !strings.Contains(files[c.file], c.old) {
				t.Fatalf("%s has no %q: update the test", c.file, c.old)
			}
			files[c.file] = strings.Replace(files[c.file], c.old, c.new, 1)
			dir := t.TempDir()
			for name, text := range files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			_, err := loadImageDef(dir)
			if err == nil {
				t.Fatalf("edit accepted; want an error matching %q", c.want)
			}
			prefix := regexp.QuoteMeta(filepath.Join(dir, c.file)) + ":"
			if c.line != "" {
				prefix += lineOf(files[c.file], c.line) + ": "
			}
			if !regexp.MustCompile("^" + prefix + ".*" + c.want).MatchString(err.Error()) {
				t.Errorf("error %q,\nwant one matching %q", err, prefix+".*"+c.want)
			}
		})
	}
}

func TestStaticELF(t *testing.T) {
	dir := t.TempDir()
	static := filepath.Join(dir, "pause")
	if err := buildStatic(t.Context(), "./test/node/pause", static); err != nil {
		t.Fatal(err)
	}
	text := filepath.Join(dir, "text")
	if err := os.WriteFile(text, []byte("#!/bin/sh\n"+strings.Repeat("# not an ELF file\n", 8)), 0o755); err != nil {
		t.Fatal(err)
	}
	// Debian's shell is dynamically linked against libc.
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	sh, _ = filepath.EvalSymlinks(sh)
	for _, c := range []struct {
		path, want string
	}{
		{static, ""},
		{sh, "dynamically linked (interpreter /lib"},
		{text, "bad magic number"},
	} {
		err := staticELF(c.path)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v, want static", c.path, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: error %v, want one containing %q", c.path, err, c.want)
		}
	}
}

// The builder's images: the base first, then each tag's binary, static
// (build checks), at the Dockerfile's path, printing the version and
// commit it was stamped with.
func TestBuildRollplan(t *testing.T) {
	if testing.Short() {
		t.Skip("builds rollplan twice")
	}
	dir := t.TempDir()
	began := time.Now()
	ims, err := buildRollplan(context.Background(), dir, []RollplanImage{
		{Tag: "v0.1.0", Version: "v0.1.0", Commit: "aaaaaaa"},
		{Tag: "v0.2.0", Version: "v0.2.0"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("two rollplan images built in %v", time.Since(began).Round(time.Millisecond))
	if len(ims) != 3 || ims[0].Repository+":"+ims[0].Tag != BaseImage {
		t.Fatalf("images %+v, want the base then two", ims)
	}
	root, _ := moduleRoot()
	for i, want := range []string{"rollplan v0.1.0 (commit aaaaaaa)\n", "rollplan v0.2.0 (commit " + shortCommit(root) + ")\n"} {
		im := ims[i+1]
		if im.Base != BaseImage || im.User != "65532:65532" || !slices.Equal(im.Entrypoint, []string{"/rollplan"}) || len(im.Files) != 1 || im.Files[0].Path != "/rollplan" {
			t.Errorf("image %s: %+v", im.Tag, im)
			continue
		}
		out, err := exec.Command(im.Files[0].Source, "version").Output()
		if err != nil || string(out) != want {
			t.Errorf("image %s: rollplan version: %v, %q; want %q", im.Tag, err, out, want)
		}
	}
	a, _ := os.ReadFile(ims[1].Files[0].Source)
	b, _ := os.ReadFile(ims[2].Files[0].Source)
	if bytes.Equal(a, b) {
		t.Error("two versions built the same binary")
	}

	for _, bad := range []RollplanImage{{Tag: "", Version: "v1"}, {Tag: "a/b", Version: "v1"}, {Tag: "v1"}} {
		if _, err := buildRollplan(context.Background(), dir, []RollplanImage{bad}); err == nil {
			t.Errorf("image %+v accepted", bad)
		}
	}
}
