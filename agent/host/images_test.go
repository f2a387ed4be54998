package host

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// slowReader hands out its data a piece at a time with a pause, so
// concurrent uploads interleave.
type slowReader struct{ data []byte }

func (r *slowReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	time.Sleep(time.Millisecond)
	n := copy(p[:min(len(p), 32<<10)], r.data)
	r.data = r.data[n:]
	return n, nil
}

// Two uploads of one image at once each write a file of their own: the
// image ends whole, as one of them sent it, and nothing else is left in
// the folder. With one fixed temporary name for every upload of an
// image, the second upload removed the first's file under it and one
// client's bytes ended in the other's image.
func TestConcurrentUploadsOfOneImageNeverMix(t *testing.T) {
	h := New(Config{DataDir: t.TempDir()})
	t.Cleanup(func() { h.Close() })
	const size = 512 << 10
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() {
			data := bytes.Repeat([]byte{byte('a' + i)}, size)
			errs[i] = h.Images.WriteImage(TypeQemu, "disk.qcow2", &slowReader{data}, 0)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("upload %d: %v", i, err)
		}
	}
	dir := h.Images.ImagesDir(TypeQemu)
	got, err := os.ReadFile(filepath.Join(dir, "disk.qcow2"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != size || !bytes.Equal(got, bytes.Repeat(got[:1], size)) {
		t.Fatalf("the image mixes uploads or is cut: %d bytes", len(got))
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Name() != "disk.qcow2" && e.Name() != "disk.qcow2.md5sum" {
			t.Errorf("left in the images folder: %s", e.Name())
		}
	}
}
