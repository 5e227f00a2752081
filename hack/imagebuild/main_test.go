package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// buildHello compiles a tiny static linux/amd64 program that prints its arguments.
func buildHello(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	src := "package main\n\nimport (\n\t\"fmt\"\n\t\"os\"\n)\n\nfunc main() { fmt.Println(\"hello\", os.Args[1:]) }\n"
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module hello\n\ngo 1.26\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "hello")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64", "GOWORK=off", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// layerFiles returns the regular files of the image's single layer and their tar headers.
func layerFiles(t *testing.T, img v1.Image) (map[string][]byte, map[string]*tar.Header) {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("layers = %d, want 1", len(layers))
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files := map[string][]byte{}
	headers := map[string]*tar.Header{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		headers[h.Name] = h
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[h.Name] = b
		}
	}
	return files, headers
}

func TestArchiveReadsBack(t *testing.T) {
	bin := buildHello(t)
	binBytes, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "images", "hello.tar")
	ref := "docker.io/warrenmq/hello:test"
	err = run([]string{
		"-binary", bin, "-ref", ref, "-out", out,
		"-arg", "serve", "-port", "5672", "-port", "5552/tcp",
		"-label", "org.opencontainers.image.title=hello",
	})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}

	// Docker archive view (manifest.json), as `docker load` and kind read it.
	img, err := tarball.ImageFromPath(out, &tag)
	if err != nil {
		t.Fatalf("read archive as docker tarball: %v", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		what, got, want string
	}{
		{"user", cf.Config.User, "65532:65532"},
		{"entrypoint", strings.Join(cf.Config.Entrypoint, " "), "/usr/local/bin/hello"},
		{"cmd", strings.Join(cf.Config.Cmd, " "), "serve"},
		{"os", cf.OS, "linux"},
		{"architecture", cf.Architecture, "amd64"},
		{"label", cf.Config.Labels["org.opencontainers.image.title"], "hello"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.what, c.got, c.want)
		}
	}
	for _, p := range []string{"5672/tcp", "5552/tcp"} {
		if _, ok := cf.Config.ExposedPorts[p]; !ok {
			t.Errorf("exposed ports %v lack %s", cf.Config.ExposedPorts, p)
		}
	}
	files, headers := layerFiles(t, img)
	if !bytes.Equal(files["usr/local/bin/hello"], binBytes) {
		t.Errorf("layer binary (%d bytes) differs from the input (%d bytes)", len(files["usr/local/bin/hello"]), len(binBytes))
	}
	if h := headers["usr/local/bin/hello"]; h == nil || h.Mode&0o111 == 0 {
		t.Errorf("binary header %+v: want executable", h)
	}
	if !strings.Contains(string(files["etc/passwd"]), "nonroot:x:65532:65532:") {
		t.Errorf("/etc/passwd lacks the nonroot user:\n%s", files["etc/passwd"])
	}
	if h := headers["tmp/"]; h == nil || h.Mode != 0o1777 {
		t.Errorf("tmp/ header %+v: want mode 1777", h)
	}
	if h := headers["home/nonroot/"]; h == nil || h.Uid != 65532 {
		t.Errorf("home/nonroot/ header %+v: want owned by 65532", h)
	}

	// The binary taken back out of the image still runs.
	if runtime.GOOS == "linux" && runtime.GOARCH == "amd64" {
		exe := filepath.Join(t.TempDir(), "hello")
		if err := os.WriteFile(exe, files["usr/local/bin/hello"], 0o755); err != nil {
			t.Fatal(err)
		}
		got, err := exec.Command(exe, "a").Output()
		if err != nil || string(got) != "hello [a]\n" {
			t.Errorf("extracted binary: output %q, err %v", got, err)
		}
	}

	// OCI layout view (index.json), as `ctr images import` reads it.
	dir := t.TempDir()
	untar(t, out, dir)
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatalf("read archive as OCI layout: %v", err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 {
		t.Fatalf("index has %d manifests, want 1", len(im.Manifests))
	}
	desc := im.Manifests[0]
	if got := desc.Annotations["io.containerd.image.name"]; got != ref {
		t.Errorf("io.containerd.image.name = %q, want %q", got, ref)
	}
	if desc.Platform == nil || desc.Platform.Architecture != "amd64" || desc.Platform.OS != "linux" {
		t.Errorf("index platform = %+v, want linux/amd64", desc.Platform)
	}
	ociImg, err := idx.Image(desc.Digest)
	if err != nil {
		t.Fatalf("image from layout: %v", err)
	}
	c1, _ := img.ConfigName()
	c2, _ := ociImg.ConfigName()
	if c1 != c2 {
		t.Errorf("docker view config %s != OCI view config %s", c1, c2)
	}
	if cf2, err := ociImg.ConfigFile(); err != nil || cf2.Config.User != "65532:65532" {
		t.Errorf("OCI view config user: %v, %v", cf2, err)
	}

	// Same input, same image: the archive is reproducible.
	out2 := filepath.Join(t.TempDir(), "again.tar")
	if err := run([]string{"-binary", bin, "-ref", ref, "-out", out2, "-arg", "serve", "-port", "5672", "-port", "5552/tcp",
		"-label", "org.opencontainers.image.title=hello"}); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(out)
	b, _ := os.ReadFile(out2)
	if !bytes.Equal(a, b) {
		t.Error("two builds of the same input differ")
	}
}

func untar(t *testing.T, archive, dir string) {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestBadInput(t *testing.T) {
	bin := buildHello(t)
	notELF := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(notELF, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"missing flags", []string{"-binary", bin}, "required"},
		{"not ELF", []string{"-binary", notELF, "-ref", "docker.io/a/b:c", "-out", "x.tar"}, "not an ELF binary"},
		{"no such binary", []string{"-binary", "/nonexistent", "-ref", "docker.io/a/b:c", "-out", "x.tar"}, "read binary"},
		{"bad ref", []string{"-binary", bin, "-ref", "Not A Ref", "-out", "x.tar"}, "image name"},
		{"no tag", []string{"-binary", bin, "-ref", "docker.io/a/b", "-out", "x.tar"}, "image name"},
		{"not fully qualified", []string{"-binary", bin, "-ref", "warrenmq/warren:dev", "-out", "x.tar"}, "fully qualified"},
		{"user name", []string{"-binary", bin, "-ref", "docker.io/a/b:c", "-out", "x.tar", "-user", "nonroot"}, "numeric"},
		{"bad label", []string{"-binary", bin, "-ref", "docker.io/a/b:c", "-out", "x.tar", "-label", "novalue"}, "key=value"},
		{"relative path", []string{"-binary", bin, "-ref", "docker.io/a/b:c", "-out", "x.tar", "-path", "bin/x"}, "absolute"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			args := append([]string(nil), tc.args...)
			for i := range args {
				if args[i] == "x.tar" {
					args[i] = filepath.Join(dir, "x.tar")
				}
			}
			err := run(args)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
			if _, err := os.Stat(filepath.Join(dir, "x.tar")); err == nil {
				t.Error("a failed build left an archive behind")
			}
		})
	}
}

func TestSourceDateEpoch(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	got, err := sourceDateEpoch()
	if err != nil || !got.Equal(time.Unix(1700000000, 0)) {
		t.Fatalf("sourceDateEpoch = %v, %v", got, err)
	}
	t.Setenv("SOURCE_DATE_EPOCH", "yesterday")
	if _, err := sourceDateEpoch(); err == nil {
		t.Fatal("want an error for a non-numeric SOURCE_DATE_EPOCH")
	}
}
