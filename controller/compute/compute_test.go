package compute

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/labtap/labtap/controller/project"
	"github.com/labtap/labtap/proto"
)

func registryFor(t *testing.T, url string) *Registry {
	t.Helper()
	r := NewRegistry(RegistryConfig{Client: NewClient(ClientConfig{Retries: 2, RetryWait: time.Millisecond, Timeout: 5 * time.Second})})
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
			err := registryFor(t, agent.URL).Agents.DeleteNode(t.Context(), "c1", "p", "n1")
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
	rt, err := r.Agents.SetNodeStatus(t.Context(), "c1", "p", "n1", "started")
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
	if _, err := r.Agents.SetNodeStatus(t.Context(), "c1", "p", "n1", "started"); err == nil {
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
	r := NewRegistry(RegistryConfig{Client: NewClient(ClientConfig{Retries: 1, RetryWait: time.Millisecond, Timeout: 5 * time.Second})})
	r.Add(t.Context(), Compute{ID: "gone", URL: url})
	if c, _ := r.Get("gone"); c.Connected || c.LastError == "" || c.CPUPercent != nil {
		t.Fatalf("unreachable compute: %+v", c)
	}
	err = r.Agents.DeleteLink(t.Context(), "gone", "p", "l")
	want := "Cannot connect to compute 'gone' with request DELETE /v1/projects/p/links/l"
	if !errors.Is(err, project.ErrConflict) || err.Error() != want {
		t.Fatalf("DeleteLink = %v, want %q", err, want)
	}
	if err := r.Agents.DeleteLink(t.Context(), "nope", "p", "l"); !errors.Is(err, project.ErrNotFound) {
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
			_, err := r.Create(t.Context(), Compute{ID: fmt.Sprintf("agent%d", i), Name: fmt.Sprintf("agent%d", i), Protocol: "http", Host: "127.0.0.1", Port: port}, Grant{})
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

// probe is an HTTP listener that records the secret each call carried.
type probe struct {
	*httptest.Server
	mu      sync.Mutex
	secrets []string
}

func newProbe(t *testing.T) *probe {
	p := &probe{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.secrets = append(p.secrets, r.Header.Get(proto.SecretHeader))
		p.mu.Unlock()
		w.Write([]byte(`{"node_types":["vpcs"]}`))
	}))
	t.Cleanup(p.Close)
	return p
}

func (p *probe) got() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.secrets)
}

func (p *probe) hostPort(t *testing.T) (string, int) {
	host, port, _ := net.SplitHostPort(p.Listener.Addr().String())
	n, _ := strconv.Atoi(port)
	return host, n
}

func TestTheControllerSecretGoesOnlyToComputesItBelongsTo(t *testing.T) {
	const secret = "controller-wide"
	tests := []struct {
		name    string
		trusted []string
		pw      string
		grant   Grant
		want    string // the secret the compute is called with
		refused error
	}{
		{"added by hand: nothing", nil, "", Grant{}, "", nil},
		{"added by hand with a password: its password", nil, "pw", Grant{}, "pw", nil},
		{"asked for an untrusted host", []string{"10.0.0.*"}, "", Grant{Ask: true}, "", project.ErrForbidden},
		{"asked for a trusted host", []string{"10.0.0.*", "127.0.0.0/8"}, "", Grant{Ask: true}, secret, nil},
		{"asked for a host a glob trusts", []string{"127.0.0.?"}, "", Grant{Ask: true}, secret, nil},
		{"an agent proving the secret", nil, "", Grant{Presented: secret}, secret, nil},
		{"an agent with a wrong secret", nil, "", Grant{Presented: "guess"}, "", project.ErrForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newProbe(t)
			host, port := p.hostPort(t)
			r := NewRegistry(RegistryConfig{Secret: secret, TrustedAgents: tt.trusted,
				Client: NewClient(ClientConfig{Retries: 0, Timeout: 5 * time.Second})})
			_, err := r.Create(t.Context(), Compute{ID: "probe", Name: "probe", Protocol: "http", Host: host, Port: port, User: "u", Password: tt.pw}, tt.grant)
			if tt.refused != nil {
				if !errors.Is(err, tt.refused) {
					t.Fatalf("Create = %v, want %v", err, tt.refused)
				}
				if _, ok := r.Get("probe"); ok {
					t.Fatal("a refused compute was registered")
				}
			} else if err != nil {
				t.Fatal(err)
			}
			for _, s := range p.got() {
				if s != tt.want {
					t.Fatalf("the probe was called with secret %q, want %q", s, tt.want)
				}
			}
			if tt.refused == nil && len(p.got()) == 0 {
				t.Fatal("the compute was never called")
			}
		})
	}
}

func TestAComputeThatMovesKeepsTheSecretOnlyIfTheRequestVouches(t *testing.T) {
	const secret = "controller-wide"
	a, b := newProbe(t), newProbe(t)
	r := NewRegistry(RegistryConfig{Secret: secret, Client: NewClient(ClientConfig{Retries: 0, Timeout: 5 * time.Second})})
	host, port := a.hostPort(t)
	if _, err := r.Create(t.Context(), Compute{ID: "ag", Name: "ag", Protocol: "http", Host: host, Port: port}, Grant{Presented: secret}); err != nil {
		t.Fatal(err)
	}
	if got := a.got(); len(got) == 0 || got[0] != secret {
		t.Fatalf("the registered agent was called with %q", got)
	}
	// Moved by a request that does not vouch: the new address gets nothing.
	_, port = b.hostPort(t)
	if _, err := r.Update(t.Context(), "ag", ComputeUpdate{Port: &port}); err != nil {
		t.Fatal(err)
	}
	for _, s := range b.got() {
		if s != "" {
			t.Fatalf("a compute moved without proof was called with secret %q", s)
		}
	}
	// The agent registering again from there proves it: it gets it back.
	if _, err := r.Create(t.Context(), Compute{ID: "ag", Protocol: "http", Host: host, Port: port}, Grant{Presented: secret}); err != nil {
		t.Fatal(err)
	}
	if got := b.got(); got[len(got)-1] != secret {
		t.Fatalf("after proving the secret the agent was called with %q", got[len(got)-1])
	}
}

// A change that saves while an earlier change's save waits for the
// store's lock must not be undone by that earlier save: each save writes
// the list as it is when it holds the lock.
func TestAnEarlierSaveDoesNotWriteAnOlderList(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	path := filepath.Join(t.TempDir(), "computes.json")
	r := NewRegistry(RegistryConfig{Path: path, Client: NewClient(ClientConfig{Retries: 0, Timeout: time.Second})})
	held, release := make(chan struct{}), make(chan struct{})
	var saves atomic.Int32
	r.store.beforeLock = func() {
		if saves.Add(1) == 1 {
			close(held)
			<-release
		}
	}
	mk := func(id string) Compute {
		return Compute{ID: id, Name: id, Protocol: "http", Host: "127.0.0.1", Port: port}
	}
	done := make(chan error, 1)
	go func() {
		_, err := r.Create(context.Background(), mk("first"), Grant{})
		done <- err
	}()
	<-held
	if _, err := r.Create(t.Context(), mk("second"), Grant{}); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	reloaded := NewRegistry(RegistryConfig{Path: path, Client: NewClient(ClientConfig{Retries: 0, Timeout: time.Second})})
	if err := reloaded.Load(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := len(reloaded.List()); got != 2 {
		t.Fatalf("the file holds %d computes, want 2", got)
	}
}
