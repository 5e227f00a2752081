package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// The project's Dockerfiles parse, and an image built from one carries
// exactly what its final stage says.
func TestProjectDockerfiles(t *testing.T) {
	tests := []struct {
		file, path string
		entrypoint []string
		cmd        []string
		ports      int
	}{
		{"warren.Dockerfile", "/usr/local/bin/warren", []string{"/usr/local/bin/warren"}, []string{"serve"}, 7},
		{"warren-operator.Dockerfile", "/usr/local/bin/warren-operator", []string{"/usr/local/bin/warren-operator"}, nil, 0},
		{"warren-perf.Dockerfile", "/usr/local/bin/warren-perf", []string{"/usr/local/bin/warren-perf"}, nil, 0},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			var s spec
			if err := applyDockerfile(&s, filepath.Join("..", "..", "images", tc.file)); err != nil {
				t.Fatal(err)
			}
			if s.Path != tc.path || s.User != "65532:65532" || !reflect.DeepEqual(s.Entrypoint, tc.entrypoint) ||
				!reflect.DeepEqual(s.Cmd, tc.cmd) || len(s.Ports) != tc.ports {
				t.Errorf("spec from %s = %+v", tc.file, s)
			}
			if s.Labels["org.opencontainers.image.source"] != "https://github.com/warrenmq/warren" {
				t.Errorf("labels = %v", s.Labels)
			}
		})
	}

	bin := buildHello(t)
	out := filepath.Join(t.TempDir(), "warren.tar")
	ref := "docker.io/warrenmq/warren:dev"
	if err := run([]string{"-binary", bin, "-ref", ref, "-out", out,
		"-dockerfile", filepath.Join("..", "..", "images", "warren.Dockerfile")}); err != nil {
		t.Fatal(err)
	}
	tag, _ := name.NewTag(ref)
	img, err := tarball.ImageFromPath(out, &tag)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(append(cf.Config.Entrypoint, cf.Config.Cmd...), " "); got != "/usr/local/bin/warren serve" {
		t.Errorf("entrypoint+cmd = %q", got)
	}
	if _, ok := cf.Config.ExposedPorts["15692/tcp"]; !ok {
		t.Errorf("exposed ports = %v", cf.Config.ExposedPorts)
	}
	if cf.Config.Labels["org.opencontainers.image.title"] != "warren" {
		t.Errorf("labels = %v", cf.Config.Labels)
	}
	files, _ := layerFiles(t, img)
	if _, ok := files["usr/local/bin/warren"]; !ok {
		t.Error("the binary is not at the Dockerfile's COPY destination")
	}
}

func TestDockerfileErrors(t *testing.T) {
	tests := []struct {
		name, text, want string
	}{
		{"no FROM", "COPY a /b\n", "no FROM"},
		{"RUN in final stage", "FROM x\nCOPY a /b\nRUN true\n", "RUN in the final stage"},
		{"shell form", "FROM x\nCOPY a /b\nENTRYPOINT /b serve\n", "exec form"},
		{"no COPY", "FROM x\nUSER 1\n", "no COPY"},
		{"bad label", "FROM x\nCOPY a /b\nLABEL a=\"open\n", "unterminated"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "Dockerfile")
			if err := os.WriteFile(f, []byte(tc.text), 0o644); err != nil {
				t.Fatal(err)
			}
			var s spec
			err := applyDockerfile(&s, f)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}
