package api_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labtap/labtap/agent/api"
	"github.com/labtap/labtap/agent/host"
	"github.com/labtap/labtap/proto"
)

// send makes one request to the agent at url with header, and returns its
// status and error code (for a proto error).
func send(t *testing.T, url, method, path string, header map[string]string) (int, proto.Code) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), method, url+path, strings.NewReader("{}"))
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var e proto.Error
	if resp.Header.Get("Content-Type") == "application/json" {
		json.NewDecoder(resp.Body).Decode(&e)
	}
	return resp.StatusCode, e.Code
}

// Every route of the agent, its console and capture streams included,
// answers 401 without the secret and with a wrong one, before it looks
// anything up; with the secret the route runs.
func TestSecurityEveryAgentRouteNeedsTheSecret(t *testing.T) {
	a := linked(t)
	routes := api.Routes(newHandler(t, secret))
	if len(routes) < 30 {
		t.Fatalf("only %d routes: %q", len(routes), routes)
	}
	fill := strings.NewReplacer("{project}", projectID, "{node}", nodeA, "{link}", linkID, "{path...}", "x", "{type}", "qemu", "{id}", "x")
	for _, pattern := range append(routes, "GET /v1/no/such/route") {
		method, template, _ := strings.Cut(pattern, " ")
		path := fill.Replace(template)
		t.Run(pattern, func(t *testing.T) {
			for name, h := range map[string]map[string]string{
				"no secret":    nil,
				"wrong secret": {proto.SecretHeader: "not-" + secret},
				"empty secret": {proto.SecretHeader: ""},
			} {
				if status, code := send(t, a.url, method, path, h); status != 401 || code != proto.CodeUnauthorized {
					t.Fatalf("%s: %d %q, want 401 unauthorized", name, status, code)
				}
			}
			if strings.Contains(pattern, "no/such") {
				return
			}
			if method == "GET" && (strings.HasSuffix(template, "/pcap") || template == proto.EventsPath) {
				return // streams: the capture walk and the events tests read them with the secret
			}
			if status, code := send(t, a.url, method, path, map[string]string{proto.SecretHeader: secret}); status == 401 || code == proto.CodeUnauthorized {
				t.Fatalf("with the secret: %d %q", status, code)
			}
		})
	}
}

// A web page cannot reach the agent through a browser: a request that
// says it comes from a page (Origin, or a Sec-Fetch-Site other than none)
// is 403, whether the agent has a secret or not.
func TestSecurityAgentRefusesRequestsFromWebPages(t *testing.T) {
	for _, s := range []string{secret, ""} {
		srv := httptest.NewServer(newHandler(t, s))
		t.Cleanup(srv.Close)
		for name, h := range map[string]map[string]string{
			"a foreign origin": {"Origin": "http://evil.example"},
			"its own origin":   {"Origin": srv.URL},
			"cross-site":       {"Sec-Fetch-Site": "cross-site"},
			"same-site":        {"Sec-Fetch-Site": "same-site"},
		} {
			h[proto.SecretHeader] = s
			status, code := send(t, srv.URL, "PUT", proto.ProjectPath(projectID), h)
			if status != 403 || code != proto.CodeForbidden {
				t.Fatalf("secret %q, %s: %d %q, want 403 forbidden", s, name, status, code)
			}
		}
		if status, _ := send(t, srv.URL, "PUT", proto.ProjectPath(projectID), map[string]string{proto.SecretHeader: s}); status != 204 {
			t.Fatalf("secret %q, no page: %d, want 204", s, status)
		}
	}
}

// newHandler is an agent handler on a fresh host, with secret.
func newHandler(t *testing.T, secret string) http.Handler {
	h := host.New(host.Config{DataDir: t.TempDir()})
	t.Cleanup(func() { h.Close() })
	return api.NewHandler(api.Parts{Service: h, Captures: h.Captures, Filters: h.Filters, Events: h.Events, Images: h.Images}, api.Config{Secret: secret})
}
