package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fasthttp/websocket"
	agentapi "github.com/labtap/labtap/agent/api"
	"github.com/labtap/labtap/agent/host"
	"github.com/labtap/labtap/agent/node"
	"github.com/labtap/labtap/controller/api"
	"github.com/labtap/labtap/controller/compute"
	"github.com/labtap/labtap/controller/notify"
	"github.com/labtap/labtap/controller/project"
	"github.com/labtap/labtap/controller/topology"
)

// live is the whole controller on a loopback port, with notifications,
// in front of a real agent with fake nodes.
type live struct {
	t        *testing.T
	url      string
	hub      *notify.Hub
	projects *project.Service
}

// quickClient is the controller's agent client with its retries, their
// waits cut to milliseconds: many tests meet an agent that is not there.
func quickClient() *compute.Client {
	return compute.NewClient(compute.ClientConfig{Retries: compute.DefaultRetries, RetryWait: time.Millisecond})
}

func newLive(t *testing.T, grace time.Duration) *live {
	t.Helper()
	data := t.TempDir()
	h := host.New(host.Config{DataDir: data, Runners: map[string]host.RunnerFactory{
		"vpcs": func(ctx context.Context, env host.RunnerEnv) (node.Runner, error) {
			return node.NewFake(env.Agent, env.OnStop), nil
		},
	}})
	agent := httptest.NewServer(agentapi.NewHandler(agentapi.Parts{Service: h, Captures: h.Captures, Filters: h.Filters, Events: h.Events, Images: h.Images}, agentapi.Config{}))
	l := &live{t: t}
	ctx, cancel := context.WithCancel(context.Background())
	l.hub = notify.New(notify.Config{IdleGrace: grace, OnIdle: func(id string) { l.projects.AutoCloseIdle(ctx, id) }})
	events := &api.Events{Hub: l.hub, Version: "2.2.59"}
	reg := compute.NewRegistry(compute.RegistryConfig{Client: quickClient(), OnChange: events.ComputeChanged})
	reg.Add(t.Context(), compute.Compute{ID: "local", Name: "box", URL: agent.URL, Protocol: "http", Host: "127.0.0.1", Port: 3080})
	dir := filepath.Join(data, "projects")
	l.projects = project.NewService(project.Config{ProjectsDir: dir, Computes: reg.Agents, Events: events, Store: &topology.Store{Dir: dir},
		TemplatesFile: filepath.Join(data, "templates.json")})
	app, _, err := api.New(api.Config{Projects: l.projects, Computes: reg, Agents: reg.Agents, Hub: l.hub, Context: ctx, Version: "2.2.59",
		Load: func() (float64, float64) { return 12.5, 40 }})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go app.Listener(ln)
	t.Cleanup(func() { cancel(); app.Shutdown(); l.hub.Close(); h.Close(); agent.Close() })
	l.url = "http://" + ln.Addr().String()
	return l
}

func (l *live) call(method, path string, body any, want int) map[string]any {
	l.t.Helper()
	var rd *strings.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = strings.NewReader(string(b))
	} else {
		rd = strings.NewReader("")
	}
	req, _ := http.NewRequest(method, l.url+path, rd)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		l.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	if resp.StatusCode != want {
		l.t.Fatalf("%s %s = %d %v, want %d", method, path, resp.StatusCode, out, want)
	}
	return out
}

// event is one notification message.
type event struct {
	Action string         `json:"action"`
	Event  map[string]any `json:"event"`
}

// listener reads a notification stream (HTTP lines or WebSocket frames).
type listener struct {
	events chan event
	close  func()
}

// listenHTTP opens a JSON-lines stream and waits for its first message,
// which must be a ping: from then on, every event reaches it.
func (l *live) listenHTTP(path string) *listener {
	l.t.Helper()
	resp, err := http.Get(l.url + path)
	if err != nil {
		l.t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		l.t.Fatalf("stream %s: %d %q", path, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	ls := &listener{events: make(chan event, 1000), close: func() { resp.Body.Close() }}
	go func() {
		defer close(ls.events)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var e event
			if json.Unmarshal(sc.Bytes(), &e) == nil {
				ls.events <- e
			}
		}
	}()
	ls.first(l.t)
	l.t.Cleanup(ls.close)
	return ls
}

func (l *live) listenWS(path string) *listener {
	l.t.Helper()
	conn, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(l.url, "http")+path, nil)
	if err != nil {
		l.t.Fatalf("dial %s: %v (%v)", path, err, resp)
	}
	ls := &listener{events: make(chan event, 1000), close: func() { conn.Close() }}
	go func() {
		defer close(ls.events)
		for {
			kind, data, err := conn.ReadMessage()
			if err != nil {
				return
			}
			var e event
			if kind == websocket.TextMessage && !strings.HasSuffix(string(data), "\n") && json.Unmarshal(data, &e) == nil {
				ls.events <- e
			}
		}
	}()
	ls.first(l.t)
	l.t.Cleanup(ls.close)
	return ls
}

func (ls *listener) first(t *testing.T) {
	t.Helper()
	select {
	case e := <-ls.events:
		if e.Action != "ping" || e.Event["cpu_usage_percent"] != 12.5 || e.Event["memory_usage_percent"] != 40.0 {
			t.Fatalf("first message %+v, want a ping with the host's load", e)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no first ping")
	}
}

// next returns the next event that is not a ping.
func (ls *listener) next(t *testing.T) event {
	t.Helper()
	for {
		select {
		case e, ok := <-ls.events:
			if !ok {
				t.Fatal("stream ended")
			}
			if e.Action != "ping" {
				return e
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no event within 5 s")
		}
	}
}

func (ls *listener) expect(t *testing.T, actions ...string) []event {
	t.Helper()
	var got []event
	for _, want := range actions {
		e := ls.next(t)
		if e.Action != want {
			t.Fatalf("event %d is %s (%v), want %s", len(got), e.Action, e.Event, want)
		}
		got = append(got, e)
	}
	return got
}

func TestProjectStreamsCarryNodeLinkAndCaptureEventsInOrder(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"http", "websocket"} {
		t.Run(kind, func(t *testing.T) {
			l := newLive(t, time.Minute)
			ctl := l.listenHTTP("/v2/notifications")
			if kind == "websocket" {
				ctl = l.listenWS("/v2/notifications/ws")
			}
			p := l.call("POST", "/v2/projects", map[string]any{"name": "lab"}, 201)
			pid := p["project_id"].(string)
			if e := ctl.expect(t, "project.created")[0]; e.Event["project_id"] != pid {
				t.Fatalf("project.created %v", e.Event)
			}
			path := "/v2/projects/" + pid + "/notifications"
			if kind == "websocket" {
				path += "/ws"
			}
			var ls *listener
			if kind == "websocket" {
				ls = l.listenWS(path)
			} else {
				ls = l.listenHTTP(path)
			}
			a := l.call("POST", "/v2/projects/"+pid+"/nodes", map[string]any{"name": "PC1", "node_type": "vpcs", "compute_id": "local"}, 201)
			b := l.call("POST", "/v2/projects/"+pid+"/nodes", map[string]any{"name": "PC2", "node_type": "vpcs", "compute_id": "local"}, 201)
			// A style and a suspend at creation: GNS3 sends link.updated
			// before link.created; we send link.created alone.
			link := l.call("POST", "/v2/projects/"+pid+"/links", map[string]any{"link_style": map[string]any{"color": "red"}, "suspend": true,
				"nodes": []any{map[string]any{"node_id": a["node_id"], "adapter_number": 0, "port_number": 0},
					map[string]any{"node_id": b["node_id"], "adapter_number": 0, "port_number": 0}}}, 201)
			lp := "/v2/projects/" + pid + "/links/" + link["link_id"].(string)
			l.call("POST", "/v2/projects/"+pid+"/nodes/"+a["node_id"].(string)+"/start", nil, 200)
			l.call("POST", lp+"/start_capture", nil, 201)
			l.call("POST", lp+"/stop_capture", nil, 201)
			l.call("POST", lp+"/start_capture", nil, 201)
			l.call("DELETE", lp, nil, 204)
			got := ls.expect(t, "node.created", "node.created", "link.created", "node.updated",
				"link.updated", "link.updated", "link.updated", "link.updated", "link.deleted")
			if got[0].Event["name"] != "PC1" || got[2].Event["suspend"] != true || got[3].Event["status"] != "started" {
				t.Fatalf("payloads: %v / %v / %v", got[0].Event, got[2].Event, got[3].Event)
			}
			captures := []bool{true, false, true, false} // the last: the link's deletion ended it
			for i, want := range captures {
				if e := got[4+i]; e.Event["capturing"] != want {
					t.Fatalf("link.updated %d: capturing %v, want %v", i, e.Event["capturing"], want)
				}
			}
			if got[4].Event["capture_file_name"] != "PC1_0-0_to_PC2_0-0.pcap" || got[8].Event["capturing"] != false {
				t.Fatalf("capture payloads: %v / %v", got[4].Event, got[8].Event)
			}
			// Project lifecycle goes to the controller stream only.
			l.call("PUT", "/v2/projects/"+pid, map[string]any{"zoom": 50}, 200)
			l.call("POST", "/v2/projects/"+pid+"/close", nil, 204)
			l.call("POST", "/v2/projects/"+pid+"/open", nil, 201)
			l.call("DELETE", "/v2/projects/"+pid, nil, 204)
			ctl.expect(t, "project.updated", "project.closed", "project.opened", "project.deleted")
		})
	}
}

func TestComputeEventsReachTheControllerStream(t *testing.T) {
	t.Parallel()
	l := newLive(t, time.Minute)
	ctl := l.listenHTTP("/v2/notifications")
	l.call("POST", "/v2/computes", map[string]any{"compute_id": "far", "protocol": "http", "host": "127.0.0.1", "port": 9}, 201)
	// Its first check is an update; the creation follows.
	for {
		e := ctl.next(t)
		if e.Action == "compute.created" {
			if e.Event["compute_id"] != "far" {
				t.Fatalf("compute.created %v", e.Event)
			}
			break
		}
	}
	l.call("DELETE", "/v2/computes/far", nil, 204)
	for e := ctl.next(t); e.Action != "compute.deleted"; e = ctl.next(t) {
	}
}

func TestUnknownProjectStreamIs404AndAPlainRequestOnAWebSocketRouteIs426(t *testing.T) {
	t.Parallel()
	l := newLive(t, time.Minute)
	resp, err := http.Get(l.url + "/v2/projects/nope/notifications")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Fatalf("unknown project stream: %d", resp.StatusCode)
	}
	resp, err = http.Get(l.url + "/v2/notifications/ws")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 426 || resp.Header.Get("X-Route") != "/v2/notifications/ws" {
		t.Fatalf("plain GET on a WebSocket route: %d", resp.StatusCode)
	}
}

func TestAutoCloseWaitsForTheGraceAndHonoursTheSetting(t *testing.T) {
	t.Parallel()
	// The hub, the project service and their wiring as the controller
	// makes them (main.go), in a synctest bubble: the clock moves only
	// when every goroutine waits, so the grace is exact and takes no time.
	// A listener is a subscription to the project's stream, as each
	// notification stream of the API holds one (the test below checks
	// that a WebSocket client's departure ends it).
	synctest.Test(t, func(t *testing.T) {
		const grace = 5 * time.Second
		ctx := t.Context()
		var projects *project.Service
		hub := notify.New(notify.Config{IdleGrace: grace, OnIdle: func(id string) { projects.AutoCloseIdle(ctx, id) }})
		defer hub.Close()
		dir := filepath.Join(t.TempDir(), "projects")
		projects = project.NewService(project.Config{ProjectsDir: dir, Computes: compute.NewRegistry(compute.RegistryConfig{Client: quickClient()}).Agents,
			Events: &api.Events{Hub: hub, Version: "2.2.59"}, Store: &topology.Store{Dir: dir}})
		create := func(name string, auto bool) string {
			p, err := projects.CreateProject(ctx, project.ProjectCreate{Name: name, Settings: project.Settings{AutoClose: auto}})
			if err != nil {
				t.Fatal(err)
			}
			return p.ID
		}
		auto, keep := create("auto", true), create("keep", false)
		status := func(id string) string {
			synctest.Wait()
			p, err := projects.Project(id)
			if err != nil {
				t.Fatal(err)
			}
			return string(p.Status)
		}

		for _, id := range []string{auto, keep} {
			hub.Unsubscribe(hub.Subscribe(id))
		}
		// A listener that comes back within the grace keeps it open.
		time.Sleep(grace / 3)
		back := hub.Subscribe(auto)
		time.Sleep(2 * grace)
		if status(auto) != "opened" {
			t.Fatal("closed although a listener came back within the grace")
		}
		hub.Unsubscribe(back)
		time.Sleep(grace - time.Millisecond)
		if status(auto) != "opened" {
			t.Fatal("closed before the grace was over")
		}
		time.Sleep(time.Millisecond)
		if status(auto) != "closed" {
			t.Fatal("auto_close project still opened after the grace since its last listener left")
		}
		if status(keep) != "opened" {
			t.Fatal("a project with auto_close false was closed")
		}
	})
}

func TestAWebSocketListenerLeavingLetsItsProjectAutoClose(t *testing.T) {
	t.Parallel()
	l := newLive(t, 50*time.Millisecond)
	auto := l.call("POST", "/v2/projects", map[string]any{"name": "auto"}, 201)["project_id"].(string) // auto_close defaults to true
	keep := l.call("POST", "/v2/projects", map[string]any{"name": "keep", "auto_close": false}, 201)["project_id"].(string)
	status := func(id string) string { return l.call("GET", "/v2/projects/"+id, nil, 200)["status"].(string) }
	// A WebSocket listener's departure is noticed at once (an HTTP stream
	// notices it at its next write, within one or two pings).
	for _, id := range []string{auto, keep} {
		l.listenWS("/v2/projects/" + id + "/notifications/ws").close()
	}
	deadline := time.Now().Add(20 * time.Second)
	for status(auto) != "closed" {
		if time.Now().After(deadline) {
			t.Fatal("auto_close project still opened long after its last listener left")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if status(keep) != "opened" {
		t.Fatal("a project with auto_close false was closed")
	}
}

// BenchmarkAPIWithThousandListeners measures an API call that publishes an
// event (PUT link) with no listener and with 1,000 listeners on the
// project's HTTP stream, each a real connection read by its own client in
// this process; it fails unless every listener received every event, in
// order. "paced" times each call alone, the listeners having caught up
// before it (the timer stopped meanwhile): the API's latency while 1,000
// streams are open. "burst" sends the calls back to back: the events pile
// up, and the time per call is then what the whole fan-out costs the
// machine (1,000 socket writes, and 1,000 reads by the clients sharing its
// CPUs).
func BenchmarkAPIWithThousandListeners(b *testing.B) {
	for _, bc := range []struct {
		name  string
		n     int
		paced bool
	}{{"0_listeners", 0, false}, {"1000_listeners_paced", 1000, true}, {"1000_listeners_burst", 1000, false}} {
		n := bc.n
		b.Run(bc.name, func(b *testing.B) {
			l := newBenchLive(b)
			p := l.do("POST", "/v2/projects", `{"name": "bench"}`)["project_id"].(string)
			ids := make([]string, 2)
			for i := range ids {
				ids[i] = l.do("POST", "/v2/projects/"+p+"/nodes", `{"name": "PC", "node_type": "vpcs", "compute_id": "local"}`)["node_id"].(string)
			}
			link := l.do("POST", "/v2/projects/"+p+"/links", `{"nodes": [{"node_id": "`+ids[0]+`", "adapter_number": 0, "port_number": 0}, {"node_id": "`+ids[1]+`", "adapter_number": 0, "port_number": 0}]}`)["link_id"].(string)
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: -1}}
			// Each listener's progress: the last event it saw, every one
			// before it seen in order; -1 once its stream broke or skipped.
			progress := make([]atomic.Int64, n)
			for k := range progress {
				resp, err := client.Get(l.url + "/v2/projects/" + p + "/notifications")
				if err != nil {
					b.Fatal(err)
				}
				defer resp.Body.Close()
				ready := make(chan struct{})
				go func(at *atomic.Int64) {
					sc := bufio.NewScanner(resp.Body)
					sc.Buffer(nil, 1<<20)
					// The readers share the benchmark's two CPUs with the
					// server, so they look at each line as cheaply as they
					// can rather than decode it.
					for sc.Scan() {
						line := sc.Bytes()
						switch {
						case bytes.HasPrefix(line, []byte(`{"action":"ping"`)) && ready != nil:
							close(ready)
							ready = nil
						case bytes.HasPrefix(line, []byte(`{"action":"link.updated"`)):
							_, after, _ := bytes.Cut(line, []byte(`"width":`))
							w, _, _ := bytes.Cut(after, []byte("}"))
							if string(w) != strconv.FormatInt(at.Load()+1, 10) {
								at.Store(-1) // a missing or reordered event
								return
							}
							at.Add(1)
						}
					}
					at.Store(-1)
				}(&progress[k])
				<-ready
			}
			b.ReportAllocs()
			i := int64(0)
			for b.Loop() {
				i++
				l.do("PUT", "/v2/projects/"+p+"/links/"+link, fmt.Sprintf(`{"link_style": {"width": %d}}`, i))
				if bc.paced {
					b.StopTimer()
					caughtUp(b, progress, i)
					b.StartTimer()
				}
			}
			b.StopTimer()
			caughtUp(b, progress, i)
		})
	}
}

// caughtUp waits until every listener has seen event i.
func caughtUp(b *testing.B, progress []atomic.Int64, i int64) {
	deadline := time.Now().Add(time.Minute)
	for k := range progress {
		for progress[k].Load() != i {
			if at := progress[k].Load(); at < 0 || time.Now().After(deadline) {
				b.Fatalf("listener %d: at event %d of %d (-1: its stream broke or skipped one)", k, at, i)
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
}

type benchLive struct {
	b   *testing.B
	url string
	hub *notify.Hub
	c   *http.Client
}

func newBenchLive(b *testing.B) *benchLive {
	data := b.TempDir()
	h := host.New(host.Config{DataDir: data, Runners: map[string]host.RunnerFactory{
		"vpcs": func(ctx context.Context, env host.RunnerEnv) (node.Runner, error) {
			return node.NewFake(env.Agent, env.OnStop), nil
		},
	}})
	agent := httptest.NewServer(agentapi.NewHandler(agentapi.Parts{Service: h, Captures: h.Captures, Filters: h.Filters, Events: h.Events, Images: h.Images}, agentapi.Config{}))
	hub := notify.New(notify.Config{}) // the default queue, as the controller runs
	events := &api.Events{Hub: hub, Version: "2.2.59"}
	reg := compute.NewRegistry(compute.RegistryConfig{Client: quickClient()})
	reg.Add(b.Context(), compute.Compute{ID: "local", URL: agent.URL})
	dir := filepath.Join(data, "projects")
	svc := project.NewService(project.Config{ProjectsDir: dir, Computes: reg.Agents, Events: events, Store: &topology.Store{Dir: dir}})
	app, _, err := api.New(api.Config{Projects: svc, Computes: reg, Agents: reg.Agents, Hub: hub, Version: "2.2.59"})
	if err != nil {
		b.Fatal(err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	go app.Listener(ln)
	b.Cleanup(func() { app.Shutdown(); hub.Close(); h.Close(); agent.Close() })
	return &benchLive{b: b, url: "http://" + ln.Addr().String(), hub: hub, c: &http.Client{}}
}

func (l *benchLive) do(method, path, body string) map[string]any {
	req, _ := http.NewRequest(method, l.url+path, strings.NewReader(body))
	resp, err := l.c.Do(req)
	if err != nil {
		l.b.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	if resp.StatusCode >= 300 {
		l.b.Fatalf("%s %s: %d %v", method, path, resp.StatusCode, out)
	}
	return out
}
