package labcapture

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
	"github.com/labtap/labtap/capspec"
	"github.com/labtap/labtap/controller/project"
	"github.com/labtap/labtap/internal/testenv"
)

// fakeProjects is one project of VPCS nodes whose link captures are pipes
// the test writes pcapng records into.
type fakeProjects struct {
	dir   string
	mu    sync.Mutex
	nodes []project.Node
	links []project.Link
	feeds map[string]*feed // link id → its running capture
}

type feed struct {
	r  *io.PipeReader
	w  *io.PipeWriter
	ng *pcapgo.NgWriter
}

func (f *fakeProjects) Project(id string) (project.Project, error) {
	return project.Project{ID: id, Name: "lab one", Path: f.dir}, nil
}

func (f *fakeProjects) Links(string) ([]project.Link, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]project.Link(nil), f.links...), nil
}

func (f *fakeProjects) Link(_, id string) (project.Link, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, l := range f.links {
		if l.ID == id {
			return l, nil
		}
	}
	return project.Link{}, project.ErrNotFound
}

func (f *fakeProjects) Nodes(string) ([]project.Node, error) { return f.nodes, nil }

func (f *fakeProjects) StartCapture(_ context.Context, _, id string, spec capspec.Spec) (project.Link, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.links {
		if f.links[i].ID == id {
			f.links[i].Capture.Active = true
			f.links[i].Capture.FileName = spec.FileName
			f.links[i].Capture.Spec = spec.WithDefaults()
			r, w := io.Pipe()
			f.feeds[id] = &feed{r: r, w: w}
			return f.links[i], nil
		}
	}
	return project.Link{}, project.ErrNotFound
}

func (f *fakeProjects) StopCapture(_ context.Context, _, id string) (project.Link, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if fd := f.feeds[id]; fd != nil {
		if fd.ng != nil {
			fd.ng.Flush()
		}
		fd.w.Close()
		delete(f.feeds, id)
	}
	for i := range f.links {
		if f.links[i].ID == id {
			f.links[i].Capture.Active = false
		}
	}
	return project.Link{}, nil
}

func (f *fakeProjects) CaptureStream(_ context.Context, _, id string) (io.ReadCloser, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fd := f.feeds[id]
	if fd == nil {
		return nil, project.ErrConflict
	}
	return fd.r, nil
}

// send writes a frame into a link's capture as its agent would: the
// pcapng header first, then a record of direction dir.
func (f *fakeProjects) send(t *testing.T, id string, dir int, frame []byte) {
	t.Helper()
	f.sendAt(t, id, dir, frame, time.Now())
}

// sendAt is send with the record stamped ts.
func (f *fakeProjects) sendAt(t *testing.T, id string, dir int, frame []byte, ts time.Time) {
	t.Helper()
	f.mu.Lock()
	fd := f.feeds[id]
	f.mu.Unlock()
	if fd.ng == nil {
		ng, err := pcapgo.NewNgWriterInterface(fd.w, pcapgo.NgInterface{Name: "A", LinkType: layers.LinkTypeEthernet}, pcapgo.NgWriterOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ng.AddInterface(pcapgo.NgInterface{Name: "B", LinkType: layers.LinkTypeEthernet}); err != nil {
			t.Fatal(err)
		}
		fd.ng = ng
	}
	ci := gopacket.CaptureInfo{Timestamp: ts, CaptureLength: len(frame), Length: len(frame), InterfaceIndex: dir}
	if err := fd.ng.WritePacket(ci, frame); err != nil {
		t.Fatal(err)
	}
	if err := fd.ng.Flush(); err != nil {
		t.Fatal(err)
	}
}

func (f *fakeProjects) addLink(id, a, b string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.links = append(f.links, project.Link{ID: id, Wired: true, Endpoints: []project.Endpoint{{NodeID: a}, {NodeID: b}}})
}

// waitFor polls cond with a generous deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 30 s", what)
		}
	}
}

func TestAProjectCaptureMergesEveryLinkAndDirectionAndLinksMadeLater(t *testing.T) {
	f := &fakeProjects{dir: t.TempDir(), feeds: map[string]*feed{}, nodes: []project.Node{
		{ID: "n1", Name: "PC1", Type: "vpcs"}, {ID: "n2", Name: "PC2", Type: "vpcs"}, {ID: "n3", Name: "PC3", Type: "vpcs"},
	}}
	f.addLink("link-one", "n1", "n2")
	s := New(Config{Projects: f, Every: 10 * time.Millisecond})
	defer s.Close(context.Background())
	st, err := s.Start(t.Context(), "p", capspec.Spec{})
	if err != nil || st.FileName != "labone_all.pcapng" || st.Links != 1 || st.Interfaces != 2 {
		t.Fatalf("Start: %+v, %v", st, err)
	}
	if _, err := s.Start(t.Context(), "p", capspec.Spec{}); !errors.Is(err, project.ErrConflict) {
		t.Fatalf("a second Start: %v", err)
	}
	stream, err := s.Stream(t.Context(), "p")
	if err != nil {
		t.Fatal(err)
	}
	streamed := make(chan []byte, 1)
	go func() { b, _ := io.ReadAll(stream); streamed <- b }()

	f.send(t, "link-one", 0, []byte("one, A to B"))
	f.send(t, "link-one", 1, []byte("one, B to A"))
	f.addLink("link-two", "n2", "n3") // made while the capture runs
	waitFor(t, "the new link joins", func() bool { return s.Get("p").Links == 2 })
	f.send(t, "link-two", 1, []byte("two, B to A"))
	waitFor(t, "the frames are merged", func() bool { return s.Get("p").Frames == 3 })

	final, err := s.Stop(t.Context(), "p")
	if err != nil || final.Capturing || final.Frames != 3 || final.Interfaces != 4 {
		t.Fatalf("Stop: %+v, %v", final, err)
	}
	if len(f.feeds) != 0 {
		t.Fatal("the link captures it started still run")
	}
	file, err := os.ReadFile(final.FilePath)
	if err != nil {
		t.Fatal(err)
	}
	if live := <-streamed; !bytes.Equal(live, file) {
		t.Fatalf("the stream (%d bytes) is not the file (%d bytes)", len(live), len(file))
	}
	r, err := pcapgo.NewNgReader(bytes.NewReader(file), pcapgo.DefaultNgReaderOptions)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for {
		data, ci, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		intf, _ := r.Interface(ci.InterfaceIndex)
		got[string(data)] = intf.Name
	}
	want := map[string]string{
		"one, A to B": "PC1 Ethernet0 → PC2 Ethernet0",
		"one, B to A": "PC2 Ethernet0 → PC1 Ethernet0",
		"two, B to A": "PC3 Ethernet0 → PC2 Ethernet0",
	}
	for frame, name := range want {
		if got[frame] != name {
			t.Errorf("frame %q on interface %q, want %q", frame, got[frame], name)
		}
	}
	if r.NInterfaces() != 4 {
		t.Errorf("%d interfaces, want 4", r.NInterfaces())
	}
	// The file is never overwritten by the next capture.
	if _, err := s.Start(t.Context(), "p", capspec.Spec{}); !errors.Is(err, project.ErrConflict) {
		t.Fatalf("a capture over the file of the last one: %v", err)
	}
}

func TestAProjectCaptureIsInTimeOrderWithinEachAgentWhateverOrderTheStreamsArriveIn(t *testing.T) {
	f := &fakeProjects{dir: t.TempDir(), feeds: map[string]*feed{}}
	for i := 1; i <= 6; i++ {
		f.nodes = append(f.nodes, project.Node{ID: fmt.Sprint("n", i), Name: fmt.Sprint("PC", i), Type: "vpcs"})
	}
	// Two links on agent1, one on agent2, whose clock is an hour behind.
	f.addLink("link-one", "n1", "n2")
	f.addLink("link-two", "n3", "n4")
	f.addLink("link-three", "n5", "n6")
	agentOf := map[string]string{"PC1": "agent1", "PC2": "agent1", "PC3": "agent1", "PC4": "agent1", "PC5": "agent2", "PC6": "agent2"}
	skew := map[string]time.Duration{"agent1": 0, "agent2": -time.Hour}
	s := New(Config{Projects: f, Every: 10 * time.Millisecond, Window: 5 * time.Second})
	defer s.Close(context.Background())
	st, err := s.Start(t.Context(), "p", capspec.Spec{})
	if err != nil || st.Links != 3 {
		t.Fatalf("Start: %+v, %v", st, err)
	}
	type src struct {
		link  string
		dir   int
		agent string
	}
	sources := []src{{"link-one", 0, "agent1"}, {"link-one", 1, "agent1"}, {"link-two", 0, "agent1"}, {"link-two", 1, "agent1"}, {"link-three", 0, "agent2"}, {"link-three", 1, "agent2"}}
	base := time.Now().Truncate(time.Second)
	const rounds = 40
	for r := range rounds {
		// Each source stamps one record per round, 1 ms apart, in its
		// agent's clock; they arrive in the reverse order of their stamps.
		for i := len(sources) - 1; i >= 0; i-- {
			sc := sources[i]
			ts := base.Add(skew[sc.agent] + time.Duration(r*10+i)*time.Millisecond)
			f.sendAt(t, sc.link, sc.dir, fmt.Appendf(nil, "%s/%d#%03d", sc.link, sc.dir, r), ts)
		}
	}
	final, err := s.Stop(t.Context(), "p")
	if err != nil || final.Frames != rounds*uint64(len(sources)) {
		t.Fatalf("Stop: %+v, %v", final, err)
	}
	file, err := os.ReadFile(final.FilePath)
	if err != nil {
		t.Fatal(err)
	}
	nr, err := pcapgo.NewNgReader(bytes.NewReader(file), pcapgo.DefaultNgReaderOptions)
	if err != nil {
		t.Fatal(err)
	}
	type stamped struct {
		iface string
		ts    time.Time
	}
	var got []stamped
	last := map[string]string{} // per source, its last record
	for {
		data, ci, err := nr.ReadPacketData()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		intf, _ := nr.Interface(ci.InterfaceIndex)
		got = append(got, stamped{intf.Name, ci.Timestamp})
		name, seq, _ := strings.Cut(string(data), "#")
		if seq <= last[name] {
			t.Fatalf("record %s after #%s of the same direction", data, last[name])
		}
		last[name] = seq
	}
	if len(got) != rounds*len(sources) {
		t.Fatalf("%d records in the file, want %d", len(got), rounds*len(sources))
	}
	inOrder := func(how string, recs []stamped) {
		t.Helper()
		prev := map[string]time.Time{}
		for i, r := range recs {
			sender, _, _ := strings.Cut(r.iface, " ")
			agent := agentOf[sender]
			if agent == "" {
				t.Fatalf("%s: record %d on interface %q of no agent", how, i, r.iface)
			}
			if r.ts.Before(prev[agent]) {
				t.Fatalf("%s: record %d (%s, %v) is older than the one before it on %s (%v)", how, i, r.iface, r.ts, agent, prev[agent])
			}
			prev[agent] = r.ts
		}
	}
	inOrder("gopacket", got)

	// tshark reads it the same way.
	if !testenv.HaveTool(t, "tshark") {
		return // checked with gopacket only
	}
	out, err := exec.Command("tshark", "-r", final.FilePath, "-T", "fields", "-E", "separator=|", "-e", "frame.interface_name", "-e", "frame.time_epoch").Output()
	if err != nil {
		t.Fatalf("tshark: %v", err)
	}
	var read []stamped
	for line := range strings.Lines(strings.TrimSpace(string(out))) {
		iface, epoch, _ := strings.Cut(strings.TrimSpace(line), "|")
		sec, frac, _ := strings.Cut(epoch, ".")
		ns, _ := strconv.ParseInt((frac + "000000000")[:9], 10, 64)
		s, _ := strconv.ParseInt(sec, 10, 64)
		read = append(read, stamped{iface, time.Unix(s, ns)})
	}
	if len(read) != len(got) {
		t.Fatalf("tshark read %d records, want %d", len(read), len(got))
	}
	inOrder("tshark", read)
}

// A project deleted between Start's look-up and its file's creation (a
// DELETE racing start_capture) is 404, and its directory is not made
// again: it was a 500 with a server path, or a captures folder left in the
// deleted project's place.
func TestStartOnAProjectDeletedMeanwhileIsNotFoundAndMakesNothing(t *testing.T) {
	gone := filepath.Join(t.TempDir(), "deleted-project")
	f := &fakeProjects{dir: gone, feeds: map[string]*feed{}}
	s := New(Config{Projects: f, Every: 10 * time.Millisecond})
	defer s.Close(context.Background())
	_, err := s.Start(t.Context(), "p", capspec.Spec{})
	if !errors.Is(err, project.ErrNotFound) || strings.Contains(err.Error(), gone) {
		t.Fatalf("Start: %v, want a not found naming no path", err)
	}
	if _, err := os.Stat(gone); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the deleted project's directory was made again: %v", err)
	}
}
