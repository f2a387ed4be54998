package captures

import (
	"fmt"
	"os"
	"sync"
	"testing"
)

// BenchmarkCreate times Create: the file made, its header written, and
// the file and its directory entry made durable, in a folder that fills
// with the files of earlier iterations as a lab's captures folder does.
// "parallel" is Create as it is, the two fsyncs at once; "serial" makes
// them wait for each other (one after the other, as Create did before), for
// comparison in the same run:
//
//	go test ./captures -run '^$' -bench 'Create/' -count 5
func BenchmarkCreate(b *testing.B) {
	for _, mode := range []string{"parallel", "serial"} {
		b.Run(mode, func(b *testing.B) {
			root, err := os.OpenRoot(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			defer root.Close()
			opts := Options{}
			if mode == "serial" {
				var mu sync.Mutex
				opts.Sync = func(f *os.File) error {
					mu.Lock()
					defer mu.Unlock()
					return f.Sync()
				}
			}
			i := 0
			for b.Loop() {
				i++
				c, err := Create(root, fmt.Sprintf("c%d.pcap", i), opts)
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if err := c.Close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}
