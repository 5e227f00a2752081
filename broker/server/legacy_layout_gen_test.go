//go:build legacydata

package server_test

import (
	"archive/tar"
	"compress/gzip"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/warrenmq/warren/broker/brokertest"
)

// TestGenerateLegacyLayout writes testdata/layout-v1.tar.gz: the fixture of
// legacy_layout_test.go in the data directory layout of the broker it runs
// in. It was run at commit eeaaeef (the last one before names went through
// broker/store/pathname), from a `git worktree add /tmp/old eeaaeef` with
// this file and legacy_layout_test.go copied in:
//
//	go test -tags legacydata -run TestGenerateLegacyLayout ./broker/server/
func TestGenerateLegacyLayout(t *testing.T) {
	dir := t.TempDir()
	n := brokertest.StartConfig(t, brokertest.Config(dir))
	fillLegacy(t, n)
	checkLegacy(t, n, false)
	n.Stop()
	writeTarGz(t, dir, filepath.Join("testdata", "layout-v1.tar.gz"))
}

// writeTarGz archives the files and directories under dir (not the lock).
func writeTarGz(t *testing.T, dir, archive string) {
	f, err := os.Create(archive)
	if err != nil {
		t.Fatal(err)
	}
	zw := gzip.NewWriter(f)
	tw := tar.NewWriter(zw)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir || d.Name() == "lock" && filepath.Dir(p) == dir {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		h, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		h.Name = filepath.ToSlash(rel)
		h.ModTime, h.Uid, h.Gid, h.Uname, h.Gname = info.ModTime().UTC().Truncate(1e9), 0, 0, "", ""
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if d.Type().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			_, err = tw.Write(data)
			return err
		}
		return nil
	})
	if err == nil {
		err = tw.Close()
	}
	if err == nil {
		err = zw.Close()
	}
	if err == nil {
		err = f.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
}
