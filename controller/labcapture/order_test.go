package labcapture

import (
	"slices"
	"testing"
	"time"

	"github.com/google/gopacket"
)

// rec is a record of source k stamped at ms milliseconds, named for checks.
func rec(k ifaceKey, ms int, name string) *record {
	return &record{key: k, name: name, ci: gopacket.CaptureInfo{Timestamp: time.Unix(1700000000, 0).Add(time.Duration(ms) * time.Millisecond)}, data: []byte(name)}
}

func TestTheReorderWritesInTimestampOrderWhatArrivedOutOfIt(t *testing.T) {
	a0, a1, b := ifaceKey{"a", 0}, ifaceKey{"a", 1}, ifaceKey{"b", 0}
	o := newReorder(time.Second)
	for _, k := range []ifaceKey{a0, a1, b} {
		o.open(k)
	}
	var out []string
	emit := func(r *record) error { out = append(out, r.name); return nil }
	now := time.Unix(0, 0)
	release := func() {
		t.Helper()
		if _, _, err := o.release(now, false, emit); err != nil {
			t.Fatal(err)
		}
	}
	// a0 sends three, then b two, then a1: arrival order is not time order.
	for _, r := range []*record{rec(a0, 10, "a0@10"), rec(a0, 40, "a0@40"), rec(a0, 50, "a0@50"), rec(b, 20, "b@20"), rec(b, 45, "b@45")} {
		r.at = now
		o.push(r, emit)
		release()
	}
	if len(out) != 0 {
		t.Fatalf("%v went out while a1 had said nothing, within the window", out)
	}
	r := rec(a1, 30, "a1@30")
	r.at = now
	o.push(r, emit)
	release()
	// Every source has a record: what is older than every source's first
	// record goes; a1 is empty again, so the rest wait.
	if want := []string{"a0@10", "b@20", "a1@30"}; !slices.Equal(out, want) {
		t.Fatalf("out %v, want %v", out, want)
	}
	// The window passes: the rest go, in time order.
	now = now.Add(time.Second)
	release()
	if want := []string{"a0@10", "b@20", "a1@30", "a0@40", "b@45", "a0@50"}; !slices.Equal(out, want) {
		t.Fatalf("out %v, want %v", out, want)
	}
}

func TestTheReorderKeepsASourcesOrderAndEndedSourcesHoldNobody(t *testing.T) {
	a, b := ifaceKey{"a", 0}, ifaceKey{"b", 0}
	o := newReorder(time.Hour)
	o.open(a)
	o.open(b)
	var out []string
	emit := func(r *record) error { out = append(out, r.name); return nil }
	now := time.Unix(0, 0)
	// a's clock stepped back: its records keep their order all the same.
	for _, r := range []*record{rec(a, 50, "a1"), rec(a, 10, "a2"), rec(b, 20, "b1")} {
		r.at = now
		o.push(r, emit)
	}
	o.release(now, false, emit)
	if want := []string{"b1"}; !slices.Equal(out, want) { // a's first is at 50
		t.Fatalf("out %v, want %v", out, want)
	}
	// b's stream ends: a waits for nobody.
	o.close(b)
	o.release(now, false, emit)
	if want := []string{"b1", "a1", "a2"}; !slices.Equal(out, want) {
		t.Fatalf("out %v, want %v", out, want)
	}
	if len(o.sources) != 1 || o.emptyOpen != 1 {
		t.Fatalf("%d sources, %d empty and open; want a alone", len(o.sources), o.emptyOpen)
	}
}

func TestTheReorderQueueOfASourceIsBounded(t *testing.T) {
	a, silent := ifaceKey{"a", 0}, ifaceKey{"silent", 0}
	o := newReorder(time.Hour)
	o.open(a)
	o.open(silent)
	n := 0
	emit := func(r *record) error { n++; return nil }
	for i := range maxQueued + 100 {
		o.push(rec(a, i, "a"), emit)
	}
	if n != 100 || len(o.sources[a].q) != maxQueued {
		t.Fatalf("%d records went out, %d wait; want 100 and %d", n, len(o.sources[a].q), maxQueued)
	}
	big := &record{key: a, ci: gopacket.CaptureInfo{Timestamp: time.Unix(1800000000, 0)}, data: make([]byte, maxQueuedBytes)}
	o.push(big, emit)
	if o.sources[a].bytes > maxQueuedBytes {
		t.Fatalf("%d bytes wait, over %d", o.sources[a].bytes, maxQueuedBytes)
	}
	o.release(time.Now(), true, emit)
	if n != maxQueued+101 || o.emptyOpen != 2 {
		t.Fatalf("after a forced release: %d out, %d empty sources", n, o.emptyOpen)
	}
}
