// Command registry is the real node's image registry (test/node): an OCI
// registry held in memory (go-containerregistry's pkg/registry), served over
// plain HTTP on loopback, into which it first pushes the images a JSON spec
// describes, each built from local files (static binaries), inline files and
// directories, on no base or on another image of the spec (a base built the
// same way), with no Docker and no network. containerd on the node pulls
// from it.
//
//	registry --spec images.json --listen 127.0.0.1:0 --out ready.json
//
// Once every image is pushed it writes ready.json (the address and each
// image's manifest digest) and serves until SIGTERM or SIGINT.
//
// It is a program in its own module, not a package of the test, so that
// go-containerregistry never enters rollplan's go.mod.
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Spec is the images to build and push.
type Spec struct {
	Images []Image `json:"images"`
}

// Image is one image: its Base's layers and config, if any, then one layer
// of Files, and the config to run it. As in a Dockerfile, what the image
// sets overrides the base's: Entrypoint (which also drops the base's Cmd),
// Cmd, User, WorkingDir; Env and Labels are merged key by key.
type Image struct {
	// Repository and Tag name it in the registry: "testapp", "1.0".
	Repository string `json:"repository"`
	Tag        string `json:"tag"`
	// Base is "repository:tag" of an image earlier in the spec that this
	// one is built on (a Dockerfile's FROM); empty: none (FROM scratch,
	// with PATH=/ and working directory /).
	Base       string   `json:"base,omitempty"`
	Files      []File   `json:"files"`
	Entrypoint []string `json:"entrypoint,omitempty"`
	Cmd        []string `json:"cmd,omitempty"`
	Env        []string `json:"env,omitempty"`
	// User is the config's user ("65532:65532"); empty: the base's, or
	// root.
	User       string            `json:"user,omitempty"`
	WorkingDir string            `json:"workingDir,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`
}

// File is one entry of an image's layer at Path, owned by UID:GID with
// Mode (permission bits, and 0o1000 for sticky): a directory if Dir, else a
// regular file whose data is the file Source on this machine, or Content
// when Source is empty. A parent directory not listed is made 0755, root's.
type File struct {
	Path    string `json:"path"`
	Source  string `json:"source,omitempty"`
	Content string `json:"content,omitempty"`
	Dir     bool   `json:"dir,omitempty"`
	Mode    int64  `json:"mode"`
	UID     int    `json:"uid,omitempty"`
	GID     int    `json:"gid,omitempty"`
}

// Ready is what --out receives once every image is served.
type Ready struct {
	// Address is HOST:PORT, the registry part of each image's name.
	Address string `json:"address"`
	// Digests maps "repository:tag" to its manifest's digest.
	Digests map[string]string `json:"digests"`
}

func main() {
	specPath := flag.String("spec", "", "JSON file of the images to build and push")
	listen := flag.String("listen", "127.0.0.1:0", "address to serve on (plain HTTP)")
	out := flag.String("out", "", "file to write, once ready, with the address and digests")
	verbose := flag.Bool("v", false, "log every request")
	flag.Parse()
	if err := run(*specPath, *listen, *out, *verbose); err != nil {
		fmt.Fprintln(os.Stderr, "registry:", err)
		os.Exit(1)
	}
}

func run(specPath, listen, out string, verbose bool) error {
	if specPath == "" || out == "" {
		return errors.New("--spec and --out are required")
	}
	raw, err := os.ReadFile(specPath)
	if err != nil {
		return fmt.Errorf("read spec: %w", err)
	}
	var spec Spec
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&spec); err != nil {
		return fmt.Errorf("spec %s: %w", specPath, err)
	}
	l, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", listen, err)
	}
	logger := log.New(io.Discard, "", 0)
	if verbose {
		logger = log.New(os.Stderr, "registry: ", log.LstdFlags)
	}
	srv := &http.Server{Handler: registry.New(registry.Logger(logger)), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()

	addr := l.Addr().String()
	ready := Ready{Address: addr, Digests: map[string]string{}}
	built := map[string]v1.Image{}
	for _, im := range spec.Images {
		ref := im.Repository + ":" + im.Tag
		if _, dup := built[ref]; dup {
			return fmt.Errorf("image %s: twice in the spec", ref)
		}
		img, err := build(im, built)
		if err != nil {
			return fmt.Errorf("image %s: %w", ref, err)
		}
		digest, err := push(addr, im, img)
		if err != nil {
			return fmt.Errorf("image %s: %w", ref, err)
		}
		built[ref] = img
		ready.Digests[ref] = digest
	}
	b, err := json.MarshalIndent(ready, "", "  ")
	if err != nil {
		return err
	}
	// Written whole, then renamed: a reader never sees half of it.
	if err := os.WriteFile(out+".tmp", b, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", out, err)
	}
	if err := os.Rename(out+".tmp", out); err != nil {
		return fmt.Errorf("write %s: %w", out, err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	select {
	case err := <-served:
		return fmt.Errorf("serve on %s: %w", addr, err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(shutdown)
}

// build makes im's image: its base (one of built, by "repository:tag"),
// or an empty OCI image, a layer of its files, and its config over the
// base's.
func build(im Image, built map[string]v1.Image) (v1.Image, error) {
	var img v1.Image
	var cfg v1.Config
	if im.Base != "" {
		base, ok := built[im.Base]
		if !ok {
			return nil, fmt.Errorf("base %s: not an image earlier in the spec", im.Base)
		}
		cf, err := base.ConfigFile()
		if err != nil {
			return nil, fmt.Errorf("base %s: config: %w", im.Base, err)
		}
		img, cfg = base, *cf.Config.DeepCopy()
	} else {
		img = mutate.MediaType(empty.Image, types.OCIManifestSchema1)
		img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
		cfg = v1.Config{Env: []string{"PATH=/"}, WorkingDir: "/"}
		if len(im.Files) == 0 {
			return nil, errors.New("no files and no base")
		}
	}
	if len(im.Files) > 0 {
		layerTar, err := layer(im.Files)
		if err != nil {
			return nil, err
		}
		// Compressed once, at the fastest level: the digest and the
		// upload read the same bytes, and a 100 MB binary on loopback is
		// not worth gzip's default effort.
		l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(layerTar)), nil
		}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching, tarball.WithCompressionLevel(gzip.BestSpeed))
		if err != nil {
			return nil, fmt.Errorf("layer: %w", err)
		}
		if img, err = mutate.AppendLayers(img, l); err != nil {
			return nil, fmt.Errorf("append layer: %w", err)
		}
	}
	if im.Entrypoint != nil {
		cfg.Entrypoint, cfg.Cmd = im.Entrypoint, nil
	}
	if im.Cmd != nil {
		cfg.Cmd = im.Cmd
	}
	for _, kv := range im.Env {
		cfg.Env = setEnv(cfg.Env, kv)
	}
	if im.User != "" {
		cfg.User = im.User
	}
	if im.WorkingDir != "" {
		cfg.WorkingDir = im.WorkingDir
	}
	for k, v := range im.Labels {
		if cfg.Labels == nil {
			cfg.Labels = map[string]string{}
		}
		cfg.Labels[k] = v
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config = cfg
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return img, nil
}

// setEnv sets KEY=VALUE in env, in place of KEY's earlier value if any.
func setEnv(env []string, kv string) []string {
	key, _, _ := strings.Cut(kv, "=")
	for i, e := range env {
		if k, _, _ := strings.Cut(e, "="); k == key {
			out := append([]string(nil), env...)
			out[i] = kv
			return out
		}
	}
	return append(append([]string(nil), env...), kv)
}

// push pushes img to the registry at addr as im's repository:tag; it
// returns the manifest's digest.
func push(addr string, im Image, img v1.Image) (string, error) {
	ref, err := name.NewTag(addr+"/"+im.Repository+":"+im.Tag, name.Insecure)
	if err != nil {
		return "", fmt.Errorf("name: %w", err)
	}
	if err := remote.Write(ref, img); err != nil {
		return "", fmt.Errorf("push to %s: %w", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		return "", err
	}
	return d.String(), nil
}

// layer is a tar of files and their parent directories, with fixed times so
// the same files always make the same digest.
func layer(files []File) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	written := map[string]bool{} // path: is a directory
	sorted := append([]File(nil), files...)
	// A directory sorts before what it holds ("a" < "a/b"), so a listed
	// directory is written with its own mode before its contents.
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Path < sorted[j].Path })
	for _, f := range sorted {
		p := strings.TrimPrefix(path.Clean("/"+f.Path), "/")
		if p == "" {
			return nil, fmt.Errorf("file %q: a path in the image is required", f.Source)
		}
		if _, dup := written[p]; dup {
			return nil, fmt.Errorf("file %s: listed twice", f.Path)
		}
		var parents []string // outermost first
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if isDir, ok := written[d]; ok {
				if !isDir {
					return nil, fmt.Errorf("file %s: %s is a file, not a directory", f.Path, d)
				}
				break
			}
			written[d] = true
			parents = append([]string{d}, parents...)
		}
		for _, d := range parents {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: time.Unix(0, 0)}); err != nil {
				return nil, err
			}
		}
		written[p] = f.Dir
		if f.Dir {
			if f.Source != "" || f.Content != "" {
				return nil, fmt.Errorf("file %s: a directory has no source or content", f.Path)
			}
			mode := f.Mode
			if mode == 0 {
				mode = 0o755
			}
			hdr := &tar.Header{Typeflag: tar.TypeDir, Name: p + "/", Mode: mode, Uid: f.UID, Gid: f.GID, ModTime: time.Unix(0, 0)}
			if err := tw.WriteHeader(hdr); err != nil {
				return nil, err
			}
			continue
		}
		data := []byte(f.Content)
		if f.Source != "" {
			if f.Content != "" {
				return nil, fmt.Errorf("file %s: source and content both given", f.Path)
			}
			var err error
			if data, err = os.ReadFile(f.Source); err != nil {
				return nil, fmt.Errorf("file %s: %w", f.Path, err)
			}
		}
		mode := f.Mode
		if mode == 0 {
			mode = 0o644
		}
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: p, Mode: mode, Size: int64(len(data)), Uid: f.UID, Gid: f.GID, ModTime: time.Unix(0, 0)}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
