package api_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// listen serves the test server's app on a loopback port.
func (s *server) listen(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.app.Listener(ln)
	t.Cleanup(func() { s.app.Shutdown() })
	return ln.Addr().String()
}

// raw sends bytes as they are and reads one reply.
func raw(t *testing.T, addr, request string) (*http.Response, map[string]any) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(c, request); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("reply to %q: %v", request[:min(len(request), 60)], err)
	}
	defer resp.Body.Close()
	var body map[string]any
	data, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(data, &body); err != nil {
		t.Fatalf("reply to %q is not JSON: %d %q", request[:min(len(request), 60)], resp.StatusCode, data)
	}
	return resp, body
}

func TestEveryErrorIsJSONEvenFasthttpsOwn(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	addr := s.listen(t)
	tests := []struct {
		name    string
		request string
		status  int
	}{
		{"an unknown method", "FOO /v2/version HTTP/1.1\r\nHost: x\r\n\r\n", 405},
		{"a header line without a colon", "GET /v2/version HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n", 400},
		// With its first 16 KiB: bodies are streamed, and fasthttp reads up
		// to 8 KiB of one before any handler runs.
		{"a body over the limit", fmt.Sprintf("POST /v2/projects HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", 64<<20, strings.Repeat("{", 16<<10)), 413},
		{"headers over the buffer", "GET /v2/version HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("b", 64<<10) + "\r\n\r\n", 431},
		{"a bad request line", "GET\r\n\r\n", 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := raw(t, addr, tt.request)
			if resp.StatusCode != tt.status || body["status"] != float64(tt.status) || body["message"] == "" {
				t.Fatalf("%d %v, want %d with a message", resp.StatusCode, body, tt.status)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Fatalf("Content-Type %q", ct)
			}
		})
	}
}

// clientFrom is an HTTP client whose connections leave from src.
func clientFrom(src string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
}

func TestFailedAuthenticationIsThrottledPerClient(t *testing.T) {
	t.Parallel()
	app := authServer(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go app.Listener(ln)
	t.Cleanup(func() { app.Shutdown() })
	url := "http://" + ln.Addr().String() + "/v2/version"
	get := func(c *http.Client, pw string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("GET", url, nil)
		req.SetBasicAuth("admin", pw)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	attacker, other := clientFrom("127.0.0.2"), clientFrom("127.0.0.1")
	for i := range 10 {
		if got := get(attacker, fmt.Sprintf("guess%d", i)).StatusCode; got != 401 {
			t.Fatalf("guess %d: %d, want 401", i, got)
		}
	}
	// The eleventh try, even with the right password, waits.
	resp := get(attacker, "s3cret")
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("after 10 failures: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	// Another address is not held back.
	if got := get(other, "s3cret").StatusCode; got != 200 {
		t.Fatalf("another client: %d, want 200", got)
	}
	if got := get(other, "wrong").StatusCode; got != 401 {
		t.Fatalf("another client's one failure: %d, want 401", got)
	}
}
