package host

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// BenchmarkImagesListingSparse times a listing of the QEMU images folder
// holding one sparse image (2 TiB, or LABTAP_BENCH_SPARSE_BYTES) that no
// md5 cache knows yet, and a small image. Made in a blink, the sparse
// image used to be hashed in full by every listing; it is now too large
// to hash by default (imagesum.DefaultMaxBytes) and listed with no md5.
func BenchmarkImagesListingSparse(b *testing.B) {
	size := int64(2 << 40)
	if s := os.Getenv("LABTAP_BENCH_SPARSE_BYTES"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		size = n
	}
	h := New(Config{DataDir: b.TempDir()})
	b.Cleanup(func() { h.Close() })
	dir := h.Images.ImagesDir(TypeQemu)
	os.MkdirAll(dir, 0o755)
	huge := filepath.Join(dir, "huge.img")
	os.WriteFile(huge, []byte("QFI\xfb sparse"), 0o644)
	if err := os.Truncate(huge, size); err != nil {
		b.Skip("no sparse file of", size, "bytes here:", err)
	}
	os.WriteFile(filepath.Join(dir, "small.qcow2"), []byte("QFI\xfb small image"), 0o644)
	for b.Loop() {
		list, err := h.Images.Images(b.Context(), TypeQemu)
		if err != nil || len(list) != 2 {
			b.Fatalf("listing %v %v", list, err)
		}
	}
	b.ReportMetric(float64(size)/(1<<30), "GiB")
}
