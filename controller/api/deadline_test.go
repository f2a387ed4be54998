package api_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/labtap/labtap/controller/api"
	"github.com/labtap/labtap/controller/compute"
	"github.com/labtap/labtap/controller/project"
	"github.com/labtap/labtap/controller/topology"
)

// An agent that never answers must not hold a request forever: the
// request's deadline ends the agent call, and the client gets an error.
func TestARequestEndsAtItsDeadlineWhenAnAgentNeverAnswers(t *testing.T) {
	t.Parallel()
	cancelled := make(chan struct{}, 16)
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet { // the agent's info, asked when it is added
			w.Write([]byte(`{"node_types":["vpcs"]}`))
			return
		}
		io.Copy(io.Discard, r.Body) // the server notices a client leaving once the body is read
		select {
		case <-r.Context().Done(): // the controller gave up on the call
			cancelled <- struct{}{}
		case <-t.Context().Done():
		}
	}))
	t.Cleanup(agent.Close)
	reg := compute.NewRegistry(compute.RegistryConfig{Client: compute.NewClient(compute.ClientConfig{Timeout: time.Hour})})
	reg.Add(t.Context(), compute.Compute{ID: "local", Name: "box", Protocol: "http", Host: "127.0.0.1", Port: 3080, URL: agent.URL})
	dir := filepath.Join(t.TempDir(), "projects")
	svc := project.NewService(project.Config{ProjectsDir: dir, Computes: reg.Agents, Store: &topology.Store{Dir: dir, Version: "2.2.59"}})
	t.Cleanup(svc.Close)
	app, _, err := api.New(api.Config{Projects: svc, Computes: reg, Agents: reg.Agents, Version: "2.2.59", Context: t.Context(), RequestTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	s := &server{t: t, app: app}
	p := s.must("POST", "/v2/projects", map[string]any{"name": "deadline"}, 201, "/v2/projects").body["project_id"].(string)
	done := make(chan reply, 1)
	go func() {
		done <- s.do("POST", "/v2/projects/"+p+"/nodes", map[string]any{"name": "PC1", "node_type": "vpcs", "compute_id": "local"})
	}()
	var r reply
	select {
	case r = <-done:
	case <-time.After(time.Minute):
		t.Fatal("the request did not end at its deadline")
	}
	if r.status < 400 || !strings.Contains(string(r.raw), "message") {
		t.Fatalf("a node on an agent that never answers: %d %s", r.status, r.raw)
	}
	select {
	case <-cancelled:
	case <-time.After(time.Minute):
		t.Fatalf("the agent call was not cancelled; reply %d %s", r.status, r.raw)
	}
}
