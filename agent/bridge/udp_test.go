package bridge

import (
	"bytes"
	"testing"
	"time"
)

func TestUDPPortSendsBatchesAsSeparateDatagramsInOrder(t *testing.T) {
	for _, gso := range []bool{true, false} {
		name := "gso"
		if !gso {
			name = "no gso"
		}
		t.Run(name, func(t *testing.T) {
			em := newEmulator(t)
			p, err := ListenUDP(UDPConfig{Local: loopback0, Peer: em.addr(), NoGSO: !gso})
			if err != nil {
				t.Fatal(err)
			}
			serve(t, p)
			// Runs of equal sizes (one a GSO buffer each), a shorter frame
			// ending a run, a run longer than a GSO buffer holds, a jumbo
			// frame and a lone byte.
			var frames [][]byte
			add := func(n, size int) {
				for range n {
					f := bytes.Repeat([]byte{byte(len(frames))}, size)
					frames = append(frames, f)
				}
			}
			add(10, 1000)
			add(1, 300)
			add(50, 1500)
			add(1, 9000)
			add(2, 64)
			add(1, 1)
			if sent := p.Send(frames); sent != len(frames) {
				t.Fatalf("Send = %d, want %d", sent, len(frames))
			}
			for i, want := range frames {
				got := em.recv(2 * time.Second)
				if !bytes.Equal(got, want) {
					t.Fatalf("datagram %d: %d bytes %x..., want %d bytes of %x", i, len(got), got[:min(4, len(got))], len(want), want[0])
				}
			}
			st := p.Stats()
			if st.TxFrames != uint64(len(frames)) || st.TxErrors != 0 {
				t.Fatalf("stats %+v", st)
			}
			if gso && (st.GSOSends == 0 || !st.GSO) {
				t.Fatalf("no GSO send: %+v (this kernel may lack UDP_SEGMENT)", st)
			}
			if !gso && st.GSOSends != 0 {
				t.Fatalf("GSO used although off: %+v", st)
			}
			if st.RecvBuffer < DefaultBufferBytes || st.SendBuffer < DefaultBufferBytes {
				t.Logf("the kernel granted smaller socket buffers than asked: %+v", st)
			}
		})
	}
}

func TestUDPPortReadsBurstsWhole(t *testing.T) {
	emA, emB := newEmulator(t), newEmulator(t)
	pa, pb := facing(t, emA), facing(t, emB)
	tap := &recordingTap{}
	l := NewLink(pa, pb, nil)
	defer l.Close()
	l.SetTap(tap)
	const n = 500
	for i := range n { // a burst the relay reads in batches
		emA.sendTo(pa.LocalAddr(), seqFrame(i))
	}
	for i := range n {
		if f := emB.recv(2 * time.Second); f == nil || seqOf(f) != i {
			t.Fatalf("frame %d: got %x", i, f)
		}
	}
	if tap.len() != n {
		t.Fatalf("tap saw %d frames, want %d", tap.len(), n)
	}
}
