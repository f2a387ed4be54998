package api_test

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/labtap/labtap/agent/host"
	"github.com/labtap/labtap/agent/imagesum"
	"github.com/labtap/labtap/proto"
)

// hugeImage makes a 2 TiB sparse image (in a blink) in the agent's QEMU
// images folder, and a small one beside it.
func hugeImage(t *testing.T, a *agent) (huge, small string) {
	t.Helper()
	dir := filepath.Join(a.data, "images", "QEMU")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	huge = filepath.Join(dir, "huge.img")
	f, err := os.Create(huge)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("QFI\xfb sparse")
	f.Close()
	if err := os.Truncate(huge, 2<<40); err != nil {
		t.Skip("no 2 TiB sparse file here:", err)
	}
	small = filepath.Join(dir, "small.qcow2")
	os.WriteFile(small, []byte("QFI\xfb small image"), 0o644)
	return huge, small
}

// listImages lists the QEMU images with ctx, failing the test when the
// agent does not answer in 10 s.
func listImages(ctx context.Context, t *testing.T, a *agent) ([]proto.Image, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", a.url+proto.ImagesPath("qemu"), nil)
	req.Header.Set(proto.SecretHeader, secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var list []proto.Image
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return nil, err
	}
	return list, nil
}

func md5Of(b []byte) string { s := md5.Sum(b); return hex.EncodeToString(s[:]) }

func sumOf(list []proto.Image, name string) (string, bool) {
	for _, im := range list {
		if im.Filename == name {
			return im.MD5Sum, true
		}
	}
	return "", false
}

// waitStill waits until the agent runs no hash any more (each hash looks
// at its context every MiB) and returns its stats then.
func waitStill(t *testing.T, a *agent) imagesum.Stats {
	t.Helper()
	var st imagesum.Stats
	for range 200 {
		if st = a.host.Images.SumStats(); st.Running == 0 {
			return st
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the agent still hashes: %+v", st)
	return st
}

// By default a 2 TiB sparse image is too large to hash: listings answer
// at once with its md5 empty and never read it; smaller images keep
// their md5.
func TestSecurityImageListingDoesNotHashAHugeSparseImage(t *testing.T) {
	a := newAgent(t)
	_, small := hugeImage(t, a)
	for range 13 {
		list, err := listImages(t.Context(), t, a)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := os.ReadFile(small)
		if sum, _ := sumOf(list, "small.qcow2"); sum != md5Of(data) {
			t.Fatalf("small.qcow2 md5 %q, want %s", sum, md5Of(data))
		}
		if sum, ok := sumOf(list, "huge.img"); !ok || sum != "" {
			t.Fatalf("huge.img listed %v with md5 %q, want listed with none", ok, sum)
		}
	}
	if st := a.host.Images.SumStats(); st.Runs != 1 || st.Bytes > 1<<20 {
		t.Fatalf("stats %+v: want the small image hashed once, nothing else", st)
	}
}

// Where the huge image may be hashed, concurrent listings share one
// computation and answer by the listing wait with its md5 empty; when no
// listing waits any more the computation stops, and the next one goes on
// from where it stopped.
func TestSecurityImageListingsShareOneHashAndStopIt(t *testing.T) {
	a := newAgentWith(t, host.Config{ImageHashes: imagesum.Config{MaxBytes: 4 << 40}, ImageListWait: 3 * time.Second})
	_, small := hugeImage(t, a)
	os.Remove(small) // one hash at a time: it would wait behind the huge one
	var wg sync.WaitGroup
	for range 13 {
		wg.Go(func() {
			list, err := listImages(t.Context(), t, a)
			if err != nil {
				t.Error(err)
				return
			}
			if sum, _ := sumOf(list, "huge.img"); sum != "" {
				t.Errorf("huge.img md5 %q after 3 s of hashing", sum)
			}
		})
	}
	wg.Wait()
	st := waitStill(t, a)
	// One run, shared by all.
	if st.Runs != 1 || st.Paused != 1 {
		t.Fatalf("after 13 concurrent listings: %+v, want 1 run, paused", st)
	}
	first := st.Bytes
	if _, err := listImages(t.Context(), t, a); err != nil {
		t.Fatal(err)
	}
	st = waitStill(t, a)
	if st.Runs != 2 || st.Paused != 2 || st.Bytes <= first {
		t.Fatalf("after one more listing: %+v, want the hash resumed once and paused", st)
	}
}

// A listing whose client leaves stops the hash it alone waited for.
func TestSecurityImageListingClientLeavingStopsTheHash(t *testing.T) {
	a := newAgentWith(t, host.Config{ImageHashes: imagesum.Config{MaxBytes: 4 << 40}, ImageListWait: time.Hour})
	_, small := hugeImage(t, a)
	os.Remove(small)
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(500*time.Millisecond, cancel)
	start := time.Now()
	if _, err := listImages(ctx, t, a); err == nil {
		t.Fatal("the listing answered before its client left")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the client waited %v", d)
	}
	st := waitStill(t, a)
	if st.Runs != 1 || st.Paused != 1 || st.Finished != 0 {
		t.Fatalf("after the client left: %+v, want the hash paused", st)
	}
}

// A file replaced by another of the same size whose modification time is
// set back is hashed again: neither the agent's cache nor the md5sum file
// beside the image gives the old sum.
func TestSecurityImageMD5FollowsAReplacedFile(t *testing.T) {
	a := newAgent(t)
	dir := filepath.Join(a.data, "images", "QEMU")
	os.MkdirAll(dir, 0o755)
	p := filepath.Join(dir, "disk.qcow2")
	v1, v2 := []byte("QFI\xfb version one"), []byte("QFI\xfb version two")
	os.WriteFile(p, v1, 0o644)
	old := time.Now().Add(-time.Hour)
	os.Chtimes(p, old, old)
	list, err := listImages(t.Context(), t, a)
	if err != nil {
		t.Fatal(err)
	}
	if sum, _ := sumOf(list, "disk.qcow2"); sum != md5Of(v1) {
		t.Fatalf("md5 %q, want %s", sum, md5Of(v1))
	}
	// Replaced in place, then by a rename, each time with the old mtime.
	os.WriteFile(p, v2, 0o644)
	os.Chtimes(p, old, old)
	list, err = listImages(t.Context(), t, a)
	if err != nil {
		t.Fatal(err)
	}
	if sum, _ := sumOf(list, "disk.qcow2"); sum != md5Of(v2) {
		t.Fatalf("md5 after a rewrite %q, want %s", sum, md5Of(v2))
	}
	tmp := filepath.Join(t.TempDir(), "new")
	os.WriteFile(tmp, v1, 0o644)
	os.Chtimes(tmp, old, old)
	if err := os.Rename(tmp, p); err != nil {
		t.Skip("rename across file systems:", err)
	}
	list, err = listImages(t.Context(), t, a)
	if err != nil {
		t.Fatal(err)
	}
	if sum, _ := sumOf(list, "disk.qcow2"); sum != md5Of(v1) {
		t.Fatalf("md5 after a rename %q, want %s", sum, md5Of(v1))
	}
}
