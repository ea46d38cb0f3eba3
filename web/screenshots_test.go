package web_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestScreenshotsAreCurrent: docs/screenshots were taken of today's pages.
// scripts/screenshots.sh writes the hash of the templates and static files
// it photographed (ui.sha256, as `sha256sum` of each file, sorted, then of
// that list); a change to the UI without new screenshots fails here, so
// the docs never show an older console (issue 28).
func TestScreenshotsAreCurrent(t *testing.T) {
	want, err := os.ReadFile("../docs/screenshots/ui.sha256")
	if err != nil {
		t.Fatalf("%v: run scripts/screenshots.sh", err)
	}
	var files []string
	for _, dir := range []string{"templates", "static"} {
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				files = append(files, "web/"+p)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	sort.Strings(files)
	var list strings.Builder
	for _, f := range files {
		b, err := os.ReadFile(strings.TrimPrefix(f, "web/"))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&list, "%x  %s\n", sha256.Sum256(b), f)
	}
	sum := sha256.Sum256([]byte(list.String()))
	if got := hex.EncodeToString(sum[:]); got != strings.TrimSpace(string(want)) {
		t.Errorf("the web UI's templates or static files changed since docs/screenshots were taken (hash %s, the screenshots' %s): run scripts/screenshots.sh and commit what it writes", got, strings.TrimSpace(string(want)))
	}
}
