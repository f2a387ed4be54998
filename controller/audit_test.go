package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestAuditTrailRotatesAtItsSizeAndKeepsItsCount writes 4 MB of lines
// into a trail of 1 MB files keeping 2: it rotates, no file passes 1 MB,
// and only the newest 2 rotated files are kept beside the live one.
func TestAuditTrailRotatesAtItsSizeAndKeepsItsCount(t *testing.T) {
	data := t.TempDir()
	w, err := openAudit(data, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	line := append(bytes.Repeat([]byte("x"), 999), '\n')
	for range 4 * 1024 {
		if _, err := w.Write(line); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	// lumberjack deletes old backups in the background after a rotation:
	// wait for the count to settle.
	var files []string
	for range 200 {
		files, _ = filepath.Glob(filepath.Join(data, "audit", "*.log"))
		if len(files) <= 3 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(files) != 3 {
		t.Fatalf("files after 4 MB into 1 MB × (2 kept + 1): %v", files)
	}
	for _, f := range files {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > 1<<20 {
			t.Errorf("%s: %d bytes, over 1 MB", f, fi.Size())
		}
		if fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s: mode %v, readable by others", f, fi.Mode())
		}
	}
	if fi, err := os.Stat(filepath.Join(data, "audit")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("audit directory: %v %v", fi, err)
	}
}

// TestTheControllerWritesTheAuditTrail runs the controller: a change and
// a refusal each leave their line in <data>/audit/audit.log.
func TestTheControllerWritesTheAuditTrail(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the controller")
	}
	data := t.TempDir()
	c := startControllerWith(t, data, []string{"LABTAP_PASSWORD=admin-password"}, "--local-agent=false", "--user", "admin",
		"--audit-max-size", "1", "--audit-keep", "1")
	ok := "Basic " + base64.StdEncoding.EncodeToString([]byte("admin:admin-password"))
	if code, body := accessCall(t, "POST", c.url+"/v2/projects", ok, "application/json", `{"name": "audited"}`); code != 201 {
		t.Fatalf("create: %d %s", code, body)
	}
	bad := "Basic " + base64.StdEncoding.EncodeToString([]byte("admin:not-the-password"))
	if code, _ := accessCall(t, "GET", c.url+"/v2/projects", bad, "", ""); code != 401 {
		t.Fatalf("bad password: %d", code)
	}
	raw, err := os.ReadFile(filepath.Join(data, "audit", "audit.log"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for l := range strings.SplitSeq(strings.TrimSpace(string(raw)), "\n") {
		var r struct {
			Method string `json:"method"`
			Route  string `json:"route"`
			Status int    `json:"status"`
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		got = append(got, fmt.Sprint(r.Method, " ", r.Route, " ", r.Status))
	}
	want := []string{"POST /v2/projects 201", "GET /v2/projects 401"}
	if !slices.Equal(got, want) {
		t.Errorf("audit trail %q, want %q", got, want)
	}
	if strings.Contains(string(raw), "not-the-password") || strings.Contains(string(raw), "admin-password") {
		t.Errorf("the trail holds a password:\n%s", raw)
	}
}
