package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// entry is what a test checks of a tar header.
type entry struct {
	name     string
	typ      byte
	mode     int64
	uid, gid int
	data     string
}

func entries(t *testing.T, r io.Reader) []entry {
	t.Helper()
	var out []entry
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, entry{h.Name, h.Typeflag, h.Mode, h.Uid, h.Gid, string(b)})
	}
}

func TestLayer(t *testing.T) {
	src := filepath.Join(t.TempDir(), "bin")
	if err := os.WriteFile(src, []byte("ELF"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		files []File
		want  []entry
		err   string
	}{{
		name:  "a source file gets its parents, root's 0755",
		files: []File{{Path: "/usr/bin/app", Source: src, Mode: 0o755}},
		want: []entry{
			{"usr/", tar.TypeDir, 0o755, 0, 0, ""},
			{"usr/bin/", tar.TypeDir, 0o755, 0, 0, ""},
			{"usr/bin/app", tar.TypeReg, 0o755, 0, 0, "ELF"},
		},
	}, {
		name: "listed directories keep their mode and owner, sticky included, before what they hold",
		files: []File{
			{Path: "/home/nonroot/.profile", Content: "x", UID: 65532, GID: 65532},
			{Path: "/tmp", Dir: true, Mode: 0o1777},
			{Path: "/home/nonroot", Dir: true, Mode: 0o700, UID: 65532, GID: 65532},
			{Path: "/etc/passwd", Content: "root:x:0:0::/root:/sbin/nologin\n"},
		},
		want: []entry{
			{"etc/", tar.TypeDir, 0o755, 0, 0, ""},
			{"etc/passwd", tar.TypeReg, 0o644, 0, 0, "root:x:0:0::/root:/sbin/nologin\n"},
			{"home/", tar.TypeDir, 0o755, 0, 0, ""},
			{"home/nonroot/", tar.TypeDir, 0o700, 65532, 65532, ""},
			{"home/nonroot/.profile", tar.TypeReg, 0o644, 65532, 65532, "x"},
			{"tmp/", tar.TypeDir, 0o1777, 0, 0, ""},
		},
	}, {
		name:  "an empty content is an empty file",
		files: []File{{Path: "/etc/empty"}},
		want: []entry{
			{"etc/", tar.TypeDir, 0o755, 0, 0, ""},
			{"etc/empty", tar.TypeReg, 0o644, 0, 0, ""},
		},
	}, {
		name:  "twice",
		files: []File{{Path: "/a", Content: "1"}, {Path: "a", Content: "2"}},
		err:   "file a: listed twice",
	}, {
		name:  "a file as a directory",
		files: []File{{Path: "/a", Content: "1"}, {Path: "/a/b", Content: "2"}},
		err:   "file /a/b: a is a file, not a directory",
	}, {
		name:  "a directory with content",
		files: []File{{Path: "/d", Dir: true, Content: "x"}},
		err:   "file /d: a directory has no source or content",
	}, {
		name:  "source and content",
		files: []File{{Path: "/f", Source: src, Content: "x"}},
		err:   "file /f: source and content both given",
	}, {
		name:  "a missing source",
		files: []File{{Path: "/f", Source: src + ".missing"}},
		err:   "file /f: open " + src + ".missing",
	}} {
		t.Run(c.name, func(t *testing.T) {
			b, err := layer(c.files)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one containing %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := entries(t, bytes.NewReader(b)); !reflect.DeepEqual(got, c.want) {
				t.Errorf("layer:\n got %+v\nwant %+v", got, c.want)
			}
		})
	}
}

// An image on a base keeps the base's layers and config, and overrides or
// merges its own as a Dockerfile does; pushing it serves the digest build
// computed.
func TestBuildOnBase(t *testing.T) {
	base := Image{
		Repository: "base/static", Tag: "nonroot",
		Files:      []File{{Path: "/tmp", Dir: true, Mode: 0o1777}},
		Env:        []string{"PATH=/usr/bin:/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"},
		Cmd:        []string{"/bin/sh"},
		User:       "65532",
		WorkingDir: "/home/nonroot",
		Labels:     map[string]string{"base": "yes"},
	}
	app := Image{
		Repository: "app", Tag: "v1", Base: "base/static:nonroot",
		Files:      []File{{Path: "/app", Content: "v1", Mode: 0o755}},
		Entrypoint: []string{"/app"},
		Env:        []string{"PATH=/", "APP=1"},
		User:       "65532:65532",
		Labels:     map[string]string{"app": "v1"},
	}
	built := map[string]v1.Image{}
	for _, c := range []struct {
		im     Image
		config v1.Config
		layers int
	}{{
		im: base,
		config: v1.Config{
			Env: []string{"PATH=/usr/bin:/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}, Cmd: []string{"/bin/sh"},
			User: "65532", WorkingDir: "/home/nonroot", Labels: map[string]string{"base": "yes"},
		},
		layers: 1,
	}, {
		im: app,
		config: v1.Config{
			// The base's Cmd goes with a new Entrypoint; PATH keeps its place.
			Entrypoint: []string{"/app"},
			Env:        []string{"PATH=/", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt", "APP=1"},
			User:       "65532:65532", WorkingDir: "/home/nonroot", Labels: map[string]string{"base": "yes", "app": "v1"},
		},
		layers: 2,
	}} {
		img, err := build(c.im, built)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(cf.Config, c.config) {
			t.Errorf("%s: config\n got %+v\nwant %+v", c.im.Repository, cf.Config, c.config)
		}
		if cf.OS != "linux" {
			t.Errorf("%s: os %q, want linux", c.im.Repository, cf.OS)
		}
		layers, err := img.Layers()
		if err != nil {
			t.Fatal(err)
		}
		if len(layers) != c.layers {
			t.Errorf("%s: %d layers, want %d", c.im.Repository, len(layers), c.layers)
		}
		built[c.im.Repository+":"+c.im.Tag] = img
	}
	// The base's layer is the app's first: shared, pulled once.
	bl, _ := built["base/static:nonroot"].Layers()
	al, _ := built["app:v1"].Layers()
	bd, _ := bl[0].Digest()
	ad, _ := al[0].Digest()
	if bd != ad {
		t.Errorf("app's first layer %s, want the base's %s", ad, bd)
	}

	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	digest, err := push(addr, app, built["app:v1"])
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(addr+"/app:v1", name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Head(ref)
	if err != nil {
		t.Fatal(err)
	}
	if desc.Digest.String() != digest {
		t.Errorf("registry serves app:v1 as %s, push returned %s", desc.Digest, digest)
	}
}

func TestBuildErrors(t *testing.T) {
	for _, c := range []struct {
		im   Image
		want string
	}{
		{Image{Repository: "a", Tag: "1"}, "no files and no base"},
		{Image{Repository: "a", Tag: "1", Base: "missing:1"}, "base missing:1: not an image earlier in the spec"},
	} {
		if _, err := build(c.im, map[string]v1.Image{}); err == nil || err.Error() != c.want {
			t.Errorf("build %s:%s: error %v, want %q", c.im.Repository, c.im.Tag, err, c.want)
		}
	}
	// A base may be used without a layer of its own.
	base, err := build(Image{Repository: "b", Tag: "1", Files: []File{{Path: "/x"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	img, err := build(Image{Repository: "a", Tag: "1", Base: "b:1", User: "1"}, map[string]v1.Image{"b:1": base})
	if err != nil {
		t.Fatal(err)
	}
	if layers, _ := img.Layers(); len(layers) != 1 {
		t.Errorf("image on a base with no files: %d layers, want the base's 1", len(layers))
	}
}
