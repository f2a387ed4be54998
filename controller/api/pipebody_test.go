package api

import (
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"
)

// An export's body owns its writer: a client that leaves mid-export closes
// the body, and Close returns only once the writer has ended (it holds the
// project until then), however long it takes to notice.
func TestExportBodyCloseWaitsForItsWriter(t *testing.T) {
	var ended atomic.Bool
	body := writerBody(func(w io.Writer) error {
		defer ended.Store(true)
		for {
			if _, err := w.Write([]byte("zip bytes")); err != nil {
				time.Sleep(50 * time.Millisecond) // cleaning up after the failed write
				return err
			}
		}
	})
	if _, err := io.ReadFull(body, make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	body.Close()
	if !ended.Load() {
		t.Fatal("Close returned while the writer still ran")
	}
}

// The writer's error ends the body, and Close after the end returns.
func TestExportBodyEndsWithItsWritersError(t *testing.T) {
	boom := errors.New("disk gone")
	body := writerBody(func(w io.Writer) error {
		w.Write([]byte("part"))
		return boom
	})
	data, err := io.ReadAll(body)
	if string(data) != "part" || !errors.Is(err, boom) {
		t.Fatalf("read %q, %v; want part, %v", data, err, boom)
	}
	body.Close()
}
