package imagesum

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func md5File(t *testing.T, p string) string {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m := md5.New()
	io.Copy(m, f)
	return hex.EncodeToString(m.Sum(nil))
}

// A computation paused half-way (its only caller left) goes on from
// where it stopped and still gives the file's md5.
func TestPausedSumResumesToTheRightMD5(t *testing.T) {
	p := filepath.Join(t.TempDir(), "disk.img")
	os.WriteFile(p, []byte("head of the image"), 0o644)
	os.Truncate(p, 512<<20)
	f, _ := os.OpenFile(p, os.O_WRONLY, 0)
	f.WriteAt([]byte("tail of the image"), 300<<20)
	f.Close()
	want := md5File(t, p)

	s := New(Config{})
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		for s.Stats().Bytes == 0 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	if sum, err := s.Sum(ctx, p); !errors.Is(err, context.Canceled) {
		t.Fatalf("first Sum = %q, %v; want it cancelled half-way", sum, err)
	}
	for s.Stats().Paused == 0 {
		time.Sleep(time.Millisecond)
	}
	paused := s.Stats().Bytes
	sum, err := s.Sum(t.Context(), p)
	if err != nil || sum != want {
		t.Fatalf("Sum = %q, %v; want %s", sum, err, want)
	}
	st := s.Stats()
	if st.Bytes != 512<<20 || st.Runs != 2 || paused == 0 {
		t.Fatalf("stats %+v (paused at %d): want each byte hashed once over 2 runs", st, paused)
	}
	// Cached now, in memory and beside the file.
	if got, ok := s.Cached(p); !ok || got != want {
		t.Fatalf("Cached = %q %v", got, ok)
	}
	if got, ok := New(Config{}).Cached(p); !ok || got != want {
		t.Fatalf("a new Sums does not trust the md5sum file: %q %v", got, ok)
	}
}

// A file over MaxBytes is not hashed; the md5sum file beside it is
// replaced, never written through a link.
func TestTooLargeAndSidecarLinks(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "disk.img")
	os.WriteFile(p, []byte("0123456789"), 0o644)
	s := New(Config{MaxBytes: 5})
	if _, err := s.Sum(t.Context(), p); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Sum of a file over MaxBytes: %v", err)
	}
	outside := filepath.Join(t.TempDir(), "outside")
	os.WriteFile(outside, []byte("keep"), 0o644)
	os.Symlink(outside, p+".md5sum")
	s = New(Config{})
	if sum, err := s.Sum(t.Context(), p); err != nil || sum != md5File(t, p) {
		t.Fatalf("Sum = %q, %v", sum, err)
	}
	if data, _ := os.ReadFile(outside); string(data) != "keep" {
		t.Fatalf("written through the link: %q", data)
	}
	if st, err := os.Lstat(p + ".md5sum"); err != nil || !st.Mode().IsRegular() {
		t.Fatalf("md5sum file: %v %v", st, err)
	}
}
