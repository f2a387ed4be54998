package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labtap/labtap/capspec"
)

// server is one labtap controller and the credentials its /v2 API takes
// (HTTP Basic; none when the server runs without authentication).
type server struct {
	URL      string `json:"url"`
	User     string `json:"user,omitempty"`
	Password string `json:"password,omitempty"`
	// CASHA256 pins the CA of an https server (tls.go).
	CASHA256 string `json:"ca_sha256,omitempty"`
}

// Bounds of what the extcap reads from a server or its configuration: a
// hostile or broken server cannot make it list without end.
const (
	maxURLLen      = 2048
	maxCredLen     = 1024
	maxReplyBytes  = 16 << 20 // a JSON reply
	maxErrorBytes  = 4096     // an error reply's body, in a message
	maxProjects    = 1000
	maxLinks       = 10000
	requestTimeout = 15 * time.Second
)

// checkServerURL checks a server URL: http or https, a host, nothing else
// than a path prefix (no query, fragment or credentials).
func checkServerURL(raw string) (*url.URL, error) {
	if raw == "" {
		return nil, errors.New("no server URL: set it in the interface's options, LABTAP_URL or the configuration file")
	}
	if len(raw) > maxURLLen {
		return nil, fmt.Errorf("server URL longer than %d bytes", maxURLLen)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("server URL %q: %v", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return nil, fmt.Errorf("server URL %q: want http://HOST:PORT or https://HOST:PORT", raw)
	}
	return u, nil
}

// client speaks to one server's /v2 API.
type client struct {
	srv  server
	base string // the server URL without a trailing slash
	http *http.Client
	// stream is the client of live streams: no overall timeout.
	stream *http.Client
}

func newClient(srv server) (*client, error) {
	if _, err := checkServerURL(srv.URL); err != nil {
		return nil, err
	}
	if len(srv.CASHA256) > maxCredLen {
		return nil, errors.New("ca_sha256 too long")
	}
	if len(srv.User) > maxCredLen || len(srv.Password) > maxCredLen {
		return nil, fmt.Errorf("user or password longer than %d bytes", maxCredLen)
	}
	c := &client{
		srv:    srv,
		base:   strings.TrimRight(srv.URL, "/"),
		http:   &http.Client{Timeout: requestTimeout},
		stream: &http.Client{},
	}
	if srv.CASHA256 != "" {
		pin, err := parseFingerprint(srv.CASHA256)
		if err != nil {
			return nil, err
		}
		u, _ := url.Parse(srv.URL)
		t := pinnedTransport(pin, u.Hostname())
		c.http.Transport, c.stream.Transport = t, t
	}
	return c, nil
}

// apiError is a reply the server refused, said in a user's words.
type apiError struct {
	Status int
	Msg    string
}

func (e *apiError) Error() string { return e.Msg }

// errorFor turns a refused reply into a message for Wireshark's dialog.
func (c *client) errorFor(method, path string, resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBytes))
	var reply struct {
		Message string `json:"message"`
	}
	msg := strings.TrimSpace(string(body))
	if json.Unmarshal(body, &reply) == nil && reply.Message != "" {
		msg = reply.Message
	}
	switch resp.StatusCode {
	case http.StatusUnauthorized:
		who := "no user and password were given"
		if c.srv.User != "" || c.srv.Password != "" {
			who = fmt.Sprintf("user %q or its password is wrong", c.srv.User)
		}
		return &apiError{resp.StatusCode, fmt.Sprintf("labtap server %s refused the login (401): %s; set them in the interface's options (the gear beside the interface in the capture dialog)", c.base, who)}
	case http.StatusTooManyRequests:
		return &apiError{resp.StatusCode, fmt.Sprintf("labtap server %s: too many failed logins from this address (429): wait, then try again with the right password", c.base)}
	}
	return &apiError{resp.StatusCode, fmt.Sprintf("labtap server %s: %s %s: %d %s", c.base, method, path, resp.StatusCode, msg)}
}

func (c *client) request(ctx context.Context, method, path string, body any) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	if c.srv.User != "" || c.srv.Password != "" {
		req.SetBasicAuth(c.srv.User, c.srv.Password)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, nil
}

// call sends a request and decodes a 2xx JSON reply into out (when not nil).
func (c *client) call(ctx context.Context, method, path string, body, out any) error {
	req, err := c.request(ctx, method, path, body)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("labtap server %s cannot be reached: %v", c.base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return c.errorFor(method, path, resp)
	}
	if out == nil {
		return nil
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxReplyBytes+1))
	if err != nil {
		return fmt.Errorf("labtap server %s: %s %s: %v", c.base, method, path, err)
	}
	if len(data) > maxReplyBytes {
		return fmt.Errorf("labtap server %s: %s %s: reply over %d bytes", c.base, method, path, maxReplyBytes)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("labtap server %s: %s %s: %v", c.base, method, path, err)
	}
	return nil
}

// open starts a stream: the reply's body, open until the server ends it or
// ctx ends.
func (c *client) open(ctx context.Context, path string) (io.ReadCloser, error) {
	req, err := c.request(ctx, "GET", path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.stream.Do(req)
	if err != nil {
		return nil, fmt.Errorf("labtap server %s cannot be reached: %v", c.base, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, c.errorFor("GET", path, resp)
	}
	return resp.Body, nil
}

// The parts of labtap's /v2 replies the extcap reads.

type projectJSON struct {
	ProjectID string `json:"project_id"`
	Name      string `json:"name"`
	Status    string `json:"status"`
}

type portJSON struct {
	Name    string `json:"name"`
	Adapter int    `json:"adapter_number"`
	Port    int    `json:"port_number"`
}

type nodeJSON struct {
	NodeID string     `json:"node_id"`
	Name   string     `json:"name"`
	Ports  []portJSON `json:"ports"`
}

type endpointJSON struct {
	NodeID  string `json:"node_id"`
	Adapter int    `json:"adapter_number"`
	Port    int    `json:"port_number"`
}

type linkJSON struct {
	LinkID    string         `json:"link_id"`
	Nodes     []endpointJSON `json:"nodes"`
	Capturing bool           `json:"capturing"`
	Capture   *capspec.State `json:"capture"`
}
