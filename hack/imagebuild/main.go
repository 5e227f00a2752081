// Command imagebuild writes a container image that holds one static binary as
// an archive, with no Docker daemon and no registry: the images of
// `make images` (warren, warren-operator) and the local cluster's pause image.
//
// The image is a single layer in the style of distroless "static": /etc/passwd
// and /etc/group with root and nonroot (65532), a nonroot home, /tmp, and the
// binary. The config names a numeric non-root user (so the kubelet can verify
// runAsNonRoot), the entrypoint, labels, exposed ports and linux/amd64.
//
// The archive is an OCI image layout (oci-layout, index.json, blobs/sha256)
// whose index entry carries the image's fully qualified name in the
// io.containerd.image.name annotation, plus a Docker manifest.json pointing
// at the same blobs (the format `docker save` writes since Docker 25). So one
// file is read by `ctr -n k8s.io images import`, `kind load image-archive`,
// `docker load` and go-containerregistry's tarball and layout packages.
//
// Usage:
//
//	imagebuild -binary out/images/bin/warren -ref docker.io/warrenmq/warren:dev \
//	  -out out/images/warren.tar [-dockerfile images/warren.Dockerfile] \
//	  [-path /usr/local/bin/warren] [-user 65532:65532] [-entrypoint a,b] \
//	  [-arg serve] [-port 5672/tcp] [-label key=value]...
//
// With -dockerfile, the final stage of that Dockerfile gives the binary's
// path, the user, ports, labels, entrypoint and cmd, so `make images` and
// `docker build` make the same image; explicit flags override it.
//
// Timestamps come from SOURCE_DATE_EPOCH (default 0), so the same binary gives
// the same image digest.
package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// spec describes one image.
type spec struct {
	Ref        string            // fully qualified name, e.g. docker.io/warrenmq/warren:dev
	Binary     string            // host path of the static linux/amd64 binary
	Path       string            // path of the binary in the image
	User       string            // numeric uid[:gid]
	Entrypoint []string          // default: [Path]
	Cmd        []string          // default arguments
	Labels     map[string]string // image labels
	Ports      []string          // exposed ports, e.g. 5672/tcp
	Created    time.Time         // image and file timestamps
}

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "imagebuild:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("imagebuild", flag.ContinueOnError)
	var (
		s                           spec
		out, entrypoint, dockerfile string
		binPath, user               string
		cmdArgs, ports, labels      listFlag
	)
	fs.StringVar(&s.Binary, "binary", "", "static linux/amd64 binary to put in the image (required)")
	fs.StringVar(&s.Ref, "ref", "", "fully qualified image name with tag, e.g. docker.io/warrenmq/warren:dev (required)")
	fs.StringVar(&out, "out", "", "archive to write (required)")
	fs.StringVar(&dockerfile, "dockerfile", "", "take path, user, ports, labels, entrypoint and cmd from this Dockerfile's final stage")
	fs.StringVar(&binPath, "path", "", "path of the binary in the image (default /usr/local/bin/<binary name>)")
	fs.StringVar(&user, "user", "65532:65532", "numeric uid:gid the image runs as")
	fs.StringVar(&entrypoint, "entrypoint", "", "comma-separated entrypoint (default: the binary)")
	fs.Var(&cmdArgs, "arg", "default argument (repeatable)")
	fs.Var(&ports, "port", "exposed port such as 5672/tcp (repeatable)")
	fs.Var(&labels, "label", "label key=value (repeatable; added to the Dockerfile's)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if s.Binary == "" || s.Ref == "" || out == "" {
		fs.Usage()
		return errors.New("-binary, -ref and -out are required")
	}
	s.User = user
	s.Labels = map[string]string{}
	if dockerfile != "" {
		if err := applyDockerfile(&s, dockerfile); err != nil {
			return err
		}
	}
	// Flags given explicitly win over the Dockerfile.
	var err error
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "path":
			s.Path = binPath
		case "user":
			s.User = user
		case "entrypoint":
			s.Entrypoint = strings.Split(entrypoint, ",")
		case "arg":
			s.Cmd = cmdArgs
		case "port":
			s.Ports = ports
		case "label":
			for _, kv := range labels {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					err = fmt.Errorf("label %q: want key=value", kv)
					return
				}
				s.Labels[k] = v
			}
		}
	})
	if err != nil {
		return err
	}
	if s.Path == "" {
		s.Path = "/usr/local/bin/" + filepath.Base(s.Binary)
	}
	created, err := sourceDateEpoch()
	if err != nil {
		return err
	}
	s.Created = created
	return buildArchive(s, out)
}

func sourceDateEpoch() (time.Time, error) {
	v := os.Getenv("SOURCE_DATE_EPOCH")
	if v == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: %w", v, err)
	}
	return time.Unix(n, 0).UTC(), nil
}

// buildArchive builds the image of s and writes its archive to out
// (through a temporary file, so a failed build leaves no partial archive).
func buildArchive(s spec, out string) error {
	tag, err := name.NewTag(s.Ref, name.StrictValidation)
	if err != nil {
		return fmt.Errorf("image name %q (want a fully qualified name with a tag): %w", s.Ref, err)
	}
	if host, _, ok := strings.Cut(s.Ref, "/"); !ok || !(strings.ContainsAny(host, ".:") || host == "localhost") {
		return fmt.Errorf("image name %q is not fully qualified: start it with a registry, e.g. docker.io/%s", s.Ref, s.Ref)
	}
	img, err := buildImage(s)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return fmt.Errorf("create output directory: %w", err)
	}
	f, err := os.CreateTemp(filepath.Dir(out), ".imagebuild-*")
	if err != nil {
		return fmt.Errorf("create archive: %w", err)
	}
	defer os.Remove(f.Name())
	if err := writeArchive(f, s.Ref, tag, img); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", out, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", out, err)
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", out, err)
	}
	return os.Rename(f.Name(), out)
}

// buildImage returns the single-layer image of s.
func buildImage(s spec) (v1.Image, error) {
	uid, gid, err := parseUser(s.User)
	if err != nil {
		return nil, err
	}
	if !path.IsAbs(s.Path) {
		return nil, fmt.Errorf("path in image %q must be absolute", s.Path)
	}
	bin, err := os.ReadFile(s.Binary)
	if err != nil {
		return nil, fmt.Errorf("read binary: %w", err)
	}
	if !bytes.HasPrefix(bin, []byte("\x7fELF")) {
		return nil, fmt.Errorf("%s is not an ELF binary (build it with GOOS=linux GOARCH=amd64 CGO_ENABLED=0)", s.Binary)
	}
	layerTar, err := rootfsTar(s, uid, gid, bin)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	img, err := mutate.AppendLayers(mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON), layer)
	if err != nil {
		return nil, fmt.Errorf("append layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.Architecture = "amd64"
	cf.OS = "linux"
	cf.Created = v1.Time{Time: s.Created}
	cf.Author = "warrenmq"
	entrypoint := s.Entrypoint
	if len(entrypoint) == 0 {
		entrypoint = []string{s.Path}
	}
	cf.Config = v1.Config{
		User:       s.User,
		Entrypoint: entrypoint,
		Cmd:        s.Cmd,
		Labels:     s.Labels,
		WorkingDir: "/",
		Env:        []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/nonroot"},
	}
	if uid == 0 {
		cf.Config.Env[1] = "HOME=/root"
	}
	if len(s.Ports) > 0 {
		cf.Config.ExposedPorts = map[string]struct{}{}
		for _, p := range s.Ports {
			if !strings.Contains(p, "/") {
				p += "/tcp"
			}
			cf.Config.ExposedPorts[p] = struct{}{}
		}
	}
	for i := range cf.History {
		cf.History[i].Created = cf.Created
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("set config: %w", err)
	}
	return img, nil
}

func parseUser(u string) (uid, gid int, err error) {
	us, gs, ok := strings.Cut(u, ":")
	if uid, err = strconv.Atoi(us); err != nil || uid < 0 {
		return 0, 0, fmt.Errorf("user %q: want numeric uid[:gid]", u)
	}
	gid = uid
	if ok {
		if gid, err = strconv.Atoi(gs); err != nil || gid < 0 {
			return 0, 0, fmt.Errorf("user %q: want numeric uid[:gid]", u)
		}
	}
	return uid, gid, nil
}

// rootfsTar returns the uncompressed layer: a distroless-style root with the binary.
func rootfsTar(s spec, uid, gid int, bin []byte) ([]byte, error) {
	passwd := "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	group := "root:x:0:\nnonroot:x:65532:\n"
	if uid != 0 && uid != 65532 {
		passwd += fmt.Sprintf("user:x:%d:%d:user:/home/nonroot:/sbin/nologin\n", uid, gid)
	}
	if gid != 0 && gid != 65532 {
		group += fmt.Sprintf("user:x:%d:\n", gid)
	}
	type entry struct {
		name     string
		mode     int64
		uid, gid int
		data     []byte
		dir      bool
	}
	entries := []entry{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{name: "etc/group", mode: 0o644, data: []byte(group)},
		{name: "home/", mode: 0o755, dir: true},
		{name: "home/nonroot/", mode: 0o700, uid: 65532, gid: 65532, dir: true},
		{name: "root/", mode: 0o700, dir: true},
		{name: "tmp/", mode: 0o1777, dir: true},
	}
	// Parent directories of the binary, then the binary.
	rel := strings.TrimPrefix(path.Clean(s.Path), "/")
	seen := map[string]bool{}
	for _, e := range entries {
		seen[e.name] = true
	}
	var parents []string
	for d := path.Dir(rel); d != "." && d != "/"; d = path.Dir(d) {
		parents = append([]string{d + "/"}, parents...)
	}
	for _, d := range parents {
		if !seen[d] {
			entries = append(entries, entry{name: d, mode: 0o755, dir: true})
			seen[d] = true
		}
	}
	entries = append(entries, entry{name: rel, mode: 0o755, data: bin})

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{
			Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.gid,
			ModTime: s.Created, Format: tar.FormatPAX,
		}
		if e.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("layer %s: %w", e.name, err)
		}
		if !e.dir {
			if _, err := tw.Write(e.data); err != nil {
				return nil, fmt.Errorf("layer %s: %w", e.name, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	return buf.Bytes(), nil
}

// dockerManifestEntry is one entry of a Docker archive's manifest.json.
type dockerManifestEntry struct {
	Config   string
	RepoTags []string
	Layers   []string
}

// writeArchive writes img as an OCI image layout plus a Docker manifest.json, as one tar.
// The image is named ref (a fully qualified name as the user wrote it, which
// containerd stores unchanged) with the tag of tag.
func writeArchive(w io.Writer, ref string, tag name.Tag, img v1.Image) error {
	manifest, err := img.RawManifest()
	if err != nil {
		return fmt.Errorf("manifest: %w", err)
	}
	mdigest, err := img.Digest()
	if err != nil {
		return fmt.Errorf("manifest digest: %w", err)
	}
	mt, err := img.MediaType()
	if err != nil {
		return fmt.Errorf("media type: %w", err)
	}
	config, err := img.RawConfigFile()
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	cdigest, err := img.ConfigName()
	if err != nil {
		return fmt.Errorf("config digest: %w", err)
	}
	layers, err := img.Layers()
	if err != nil {
		return fmt.Errorf("layers: %w", err)
	}
	blobPath := func(h v1.Hash) string { return "blobs/" + h.Algorithm + "/" + h.Hex }

	index := v1.IndexManifest{
		SchemaVersion: 2,
		MediaType:     types.OCIImageIndex,
		Manifests: []v1.Descriptor{{
			MediaType: mt,
			Digest:    mdigest,
			Size:      int64(len(manifest)),
			Platform:  &v1.Platform{OS: "linux", Architecture: "amd64"},
			Annotations: map[string]string{
				"io.containerd.image.name":          ref,
				"org.opencontainers.image.ref.name": tag.TagStr(),
			},
		}},
	}
	indexJSON, err := json.Marshal(index)
	if err != nil {
		return fmt.Errorf("index.json: %w", err)
	}
	dm := []dockerManifestEntry{{Config: blobPath(cdigest), RepoTags: []string{ref}}}
	blobs := map[string][]byte{
		blobPath(mdigest): manifest,
		blobPath(cdigest): config,
	}
	for i, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return fmt.Errorf("layer %d digest: %w", i, err)
		}
		rc, err := l.Compressed()
		if err != nil {
			return fmt.Errorf("layer %d: %w", i, err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return fmt.Errorf("layer %d: %w", i, err)
		}
		blobs[blobPath(d)] = b
		dm[0].Layers = append(dm[0].Layers, blobPath(d))
	}
	dmJSON, err := json.Marshal(dm)
	if err != nil {
		return fmt.Errorf("manifest.json: %w", err)
	}

	tw := tar.NewWriter(w)
	mtime := time.Unix(0, 0).UTC()
	dir := func(n string) error {
		return tw.WriteHeader(&tar.Header{Name: n, Typeflag: tar.TypeDir, Mode: 0o755, ModTime: mtime})
	}
	file := func(n string, b []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: n, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(b)), ModTime: mtime}); err != nil {
			return err
		}
		_, err := tw.Write(b)
		return err
	}
	if err := file("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return err
	}
	if err := dir("blobs/"); err != nil {
		return err
	}
	if err := dir("blobs/sha256/"); err != nil {
		return err
	}
	names := make([]string, 0, len(blobs))
	for n := range blobs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := file(n, blobs[n]); err != nil {
			return err
		}
	}
	if err := file("index.json", indexJSON); err != nil {
		return err
	}
	if err := file("manifest.json", dmJSON); err != nil {
		return err
	}
	return tw.Close()
}
