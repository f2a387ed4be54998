package bridge

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"golang.org/x/sys/unix"
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

// A path that cannot take GSO (a kernel without it, a route whose MTU is
// below the frames, a device without checksum offload) refuses the first
// run: the port sends that run frame by frame, loses nothing, and stops
// using GSO. A socket that must not checksum its datagrams (SO_NO_CHECK)
// makes the kernel refuse every GSO send with EINVAL, as such a path does.
func TestUDPPortSendsARunTheKernelRefusesFrameByFrameAndStopsUsingGSO(t *testing.T) {
	for _, connect := range []bool{false, true} {
		t.Run(fmt.Sprintf("connected=%v", connect), func(t *testing.T) {
			em := newEmulator(t)
			p, err := ListenUDP(UDPConfig{Local: loopback0, Peer: em.addr(), Connect: connect})
			if err != nil {
				t.Fatal(err)
			}
			serve(t, p)
			var serr error
			if err := p.rc.Control(func(fd uintptr) {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_NO_CHECK, 1)
			}); err != nil || serr != nil {
				t.Fatalf("SO_NO_CHECK: %v %v", err, serr)
			}
			first, second := seqFrames(0, 20, 1000), seqFrames(20, 20, 1000)
			for _, batch := range [][][]byte{first, second} {
				if sent := p.Send(batch); sent != len(batch) {
					t.Fatalf("Send = %d, want %d", sent, len(batch))
				}
			}
			for i := range 40 {
				if f := em.recv(2 * time.Second); f == nil || seqOf(f) != i || len(f) != 1000 {
					t.Fatalf("datagram %d: %d bytes, frame %d", i, len(f), seqOf(f))
				}
			}
			st := p.Stats()
			if st.TxFrames != 40 || st.TxErrors != 0 || st.GSOSends != 0 || st.GSO {
				t.Fatalf("stats %+v, want 40 frames sent without GSO and GSO given up", st)
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

// recordingHandler keeps a copy of every frame a port hands it.
type recordingHandler struct{ recordingTap }

func (r *recordingHandler) HandleFrames(frames [][]byte) { r.WritePackets(AtoB, frames) }

// A peer agent sends runs of frames as GSO buffers. With GRO the receiving
// port takes each run in one piece and cuts it back into the very datagrams
// that were sent, in order, whatever their sizes; without, the kernel hands
// them over one by one. Either way the handler sees the same frames, and a
// run from a stranger is dropped and counted frame by frame.
func TestUDPPortTakesGSORunsInOnePieceAndCutsThemBackIntoFrames(t *testing.T) {
	for _, gro := range []bool{true, false} {
		t.Run(fmt.Sprintf("gro=%v", gro), func(t *testing.T) {
			rx, err := ListenUDP(UDPConfig{Local: loopback0, NoGRO: !gro})
			if err != nil {
				t.Fatal(err)
			}
			tx, err := ListenUDP(UDPConfig{Local: loopback0, Peer: rx.LocalAddr()})
			if err != nil {
				t.Fatal(err)
			}
			stranger, err := ListenUDP(UDPConfig{Local: loopback0, Peer: rx.LocalAddr()})
			if err != nil {
				t.Fatal(err)
			}
			rx.SetPeer(tx.LocalAddr())
			h := &recordingHandler{}
			rx.SetHandler(h)
			serve(t, rx)
			if st := rx.Stats(); st.GRO != gro {
				t.Fatalf("GRO = %v, want %v (this kernel may lack UDP_GRO)", st.GRO, gro)
			}

			if n := stranger.Send(seqFrames(0, 10, 100)); n != 10 {
				t.Fatalf("stranger sent %d", n)
			}
			waitFor(t, func() bool { return rx.Stats().Strays == 10 })

			// Runs of 64-byte and full-size frames, runs ending in a shorter
			// frame, lone frames: sent together, so that the kernel may
			// also merge runs of one size.
			var frames [][]byte
			frames = append(frames, seqFrames(0, 200, 64)...)
			frames = append(frames, seqFrames(200, 1, 40)...)
			frames = append(frames, seqFrames(201, 100, 1500)...)
			frames = append(frames, seqFrames(301, 1, 1499)...)
			frames = append(frames, seqFrames(302, 1, 9000)...)
			frames = append(frames, seqFrames(303, 300, 64)...)
			if n := tx.Send(frames); n != len(frames) {
				t.Fatalf("sent %d of %d", n, len(frames))
			}
			waitFor(t, func() bool { return h.len() >= len(frames) })
			h.mu.Lock()
			got := h.frames
			h.mu.Unlock()
			if len(got) != len(frames) {
				t.Fatalf("received %d frames, want %d", len(got), len(frames))
			}
			for i := range frames {
				if !bytes.Equal(got[i], frames[i]) {
					t.Fatalf("frame %d: %d bytes (seq %d), want %d bytes (seq %d)", i, len(got[i]), seqOf(got[i]), len(frames[i]), i)
				}
			}
			st := rx.Stats()
			if st.RxFrames != uint64(len(frames)) || st.Strays != 10 {
				t.Fatalf("stats %+v", st)
			}
			if gro && st.GRORuns == 0 {
				t.Fatalf("no run taken whole: %+v", st)
			}
			if !gro && st.GRORuns != 0 {
				t.Fatalf("GRO used although off: %+v", st)
			}
		})
	}
}

// seqFrames returns n frames of size bytes (at least 8), numbered from
// first with seqFrame's numbering.
func seqFrames(first, n, size int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		f := make([]byte, size)
		binary.BigEndian.PutUint64(f, uint64(first+i))
		for j := 8; j < size; j++ {
			f[j] = byte(first + i + j)
		}
		out[i] = f
	}
	return out
}
