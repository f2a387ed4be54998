package compute

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/labtap/labtap/controller/project"
	"github.com/labtap/labtap/proto"
)

func registryFor(t *testing.T, url string) *Registry {
	t.Helper()
	r := NewRegistry(RegistryConfig{Client: NewClient(ClientConfig{Retries: 2, Timeout: 5 * time.Second})})
	r.Add(t.Context(), Compute{ID: "c1", URL: url, Secret: "s3cret"})
	return r
}

func TestClientMapsAgentErrorsToProjectErrorsKeepingTheMessage(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		want   error
		msg    string
	}{
		{"unknown node", 404, `{"code":"not_found","message":"node n1 does not exist on this agent"}`, project.ErrNotFound, "node n1 does not exist on this agent"},
		{"conflict passes the message through", 409, `{"code":"conflict","message":"Packet capture is already active on this link"}`, project.ErrConflict, "Packet capture is already active on this link"},
		{"invalid", 400, `{"code":"invalid","message":"bad name"}`, project.ErrInvalid, "bad name"},
		{"wrong secret", 401, `{"code":"unauthorized","message":"x"}`, project.ErrConflict, "Invalid authentication for compute c1"},
		{"not JSON", 409, `plain words`, project.ErrConflict, "plain words"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == proto.InfoPath {
					w.Write([]byte(`{"node_types":["vpcs"]}`))
					return
				}
				w.WriteHeader(tt.status)
				io.WriteString(w, tt.body)
			}))
			t.Cleanup(agent.Close)
			err := registryFor(t, agent.URL).DeleteNode(t.Context(), "c1", "p", "n1")
			if !errors.Is(err, tt.want) || err.Error() != tt.msg {
				t.Fatalf("DeleteNode() = %v, want %v %q", err, tt.want, tt.msg)
			}
		})
	}
}

func TestClientRetriesUnavailableAgentsAndSendsTheSecret(t *testing.T) {
	var calls atomic.Int32
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(proto.SecretHeader) != "s3cret" {
			w.WriteHeader(401)
			return
		}
		if r.URL.Path == proto.InfoPath {
			w.Write([]byte(`{"node_types":["vpcs"],"cpu_usage_percent":12.5}`))
			return
		}
		if calls.Add(1) < 3 { // two failures, then success
			w.WriteHeader(503)
			io.WriteString(w, `{"code":"unavailable","message":"busy"}`)
			return
		}
		io.WriteString(w, `{"node_id":"n1","status":"started","console":5000}`)
	}))
	t.Cleanup(agent.Close)
	r := registryFor(t, agent.URL)
	c, _ := r.Get("c1")
	if !c.Connected || *c.CPUPercent != 12.5 || r.NodeTypes("c1")[0] != "vpcs" {
		t.Fatalf("compute after check: %+v", c)
	}
	rt, err := r.SetNodeStatus(t.Context(), "c1", "p", "n1", "started")
	if err != nil || rt.Status != "started" || rt.Console != 5000 {
		t.Fatalf("SetNodeStatus = %+v, %v", rt, err)
	}
	if calls.Load() != 3 {
		t.Fatalf("%d calls, want 3 (2 retries)", calls.Load())
	}
}

func TestZeroRetriesSendsACallOnce(t *testing.T) {
	var calls atomic.Int32
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == proto.InfoPath {
			w.Write([]byte(`{"node_types":["vpcs"]}`))
			return
		}
		calls.Add(1)
		w.WriteHeader(503)
		io.WriteString(w, `{"code":"unavailable","message":"busy"}`)
	}))
	t.Cleanup(agent.Close)
	r := NewRegistry(RegistryConfig{Client: NewClient(ClientConfig{Retries: 0, Timeout: 5 * time.Second})})
	r.Add(t.Context(), Compute{ID: "c1", URL: agent.URL})
	if _, err := r.SetNodeStatus(t.Context(), "c1", "p", "n1", "started"); err == nil {
		t.Fatal("a 503 was taken for success")
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d calls with Retries: 0, want 1", n)
	}
}

func TestUnreachableComputeIsAConflictNamingIt(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there any more
	r := NewRegistry(RegistryConfig{Client: NewClient(ClientConfig{Retries: 1, Timeout: 5 * time.Second})})
	r.Add(t.Context(), Compute{ID: "gone", URL: url})
	if c, _ := r.Get("gone"); c.Connected || c.LastError == "" || c.CPUPercent != nil {
		t.Fatalf("unreachable compute: %+v", c)
	}
	err = r.DeleteLink(t.Context(), "gone", "p", "l")
	want := "Cannot connect to compute 'gone' with request DELETE /v1/projects/p/links/l"
	if !errors.Is(err, project.ErrConflict) || err.Error() != want {
		t.Fatalf("DeleteLink = %v, want %q", err, want)
	}
	if err := r.DeleteLink(t.Context(), "nope", "p", "l"); !errors.Is(err, project.ErrNotFound) {
		t.Fatalf("unknown compute: %v", err)
	}
}

// Agents register with the controller at start; several starting together
// save the computes file at once. Every registration must succeed and the
// file must end up holding every one of them (it once failed: two saves
// shared one temp file, and the second rename found it gone).
func TestComputesRegisteringAtOnceAreAllSaved(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close() // the agents need not answer: a compute is saved either way
	path := filepath.Join(t.TempDir(), "computes.json")
	r := NewRegistry(RegistryConfig{Path: path, Client: NewClient(ClientConfig{Retries: 0, Timeout: time.Second})})
	const n = 16
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			_, err := r.Create(t.Context(), Compute{ID: fmt.Sprintf("agent%d", i), Name: fmt.Sprintf("agent%d", i), Protocol: "http", Host: "127.0.0.1", Port: port})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("Create: %v", err)
		}
	}
	reloaded := NewRegistry(RegistryConfig{Path: path, Client: NewClient(ClientConfig{Retries: 0, Timeout: time.Second})})
	if err := reloaded.Load(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := len(reloaded.List()); got != n {
		t.Fatalf("the file holds %d computes, want %d", got, n)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "*.tmp")); len(left) != 0 {
		t.Fatalf("temp files left behind: %v", left)
	}
}
