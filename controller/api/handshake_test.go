package api_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/labtap/labtap/controller/api"
	"github.com/labtap/labtap/controller/compute"
	"github.com/labtap/labtap/controller/project"
)

func bareApp(t *testing.T, pin bool) *fiber.App {
	t.Helper()
	reg := compute.NewRegistry(compute.RegistryConfig{Client: quickClient()})
	svc := project.NewService(project.Config{ProjectsDir: t.TempDir(), Computes: reg.Agents})
	app, _, err := api.New(api.Config{Projects: svc, Computes: reg, Agents: reg.Agents, Version: "2.2.59", PinVersion: pin})
	if err != nil {
		t.Fatal(err)
	}
	return app
}

// Any 2.2 GUI connects: it is answered its own version, exactly as it
// names it; anything else, and every client
// when the version is pinned, gets the configured one.
func TestVersionAnswersA22GUIItsOwnVersion(t *testing.T) {
	t.Parallel()
	ask := func(app *fiber.App, ua string) string {
		req := httptest.NewRequest("GET", "/v2/version", nil)
		if ua != "" {
			req.Header.Set("User-Agent", ua)
		}
		resp, err := app.Test(req, -1)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("%q: %d %q", ua, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		return string(body)
	}
	free, pinned := bareApp(t, false), bareApp(t, true)
	for ua, want := range map[string]string{
		"GNS3 QT Client v2.2.60":               `{"local":false,"version":"2.2.60"}`,
		"GNS3 QT Client v2.2.3":                `{"local":false,"version":"2.2.3"}`,
		"GNS3 QT Client v2.2.61.dev1+a1b2c3d":  `{"local":false,"version":"2.2.61.dev1+a1b2c3d"}`,
		"GNS3 QT Client v2.1.21":               `{"local":false,"version":"2.2.59"}`,
		"GNS3 QT Client v3.0.4":                `{"local":false,"version":"2.2.59"}`,
		"GNS3 QT Client v2.2.60 <script>":      `{"local":false,"version":"2.2.59"}`,
		"python-requests/2.32.3":               `{"local":false,"version":"2.2.59"}`,
		"":                                     `{"local":false,"version":"2.2.59"}`,
		"Mozilla/5.0 GNS3 QT Client v2.2.60 x": `{"local":false,"version":"2.2.59"}`,
	} {
		if got := ask(free, ua); got != want {
			t.Errorf("%q: %s, want %s", ua, got, want)
		}
		if got := ask(pinned, ua); got != `{"local":false,"version":"2.2.59"}` {
			t.Errorf("pinned, %q: %s", ua, got)
		}
	}
}

// A connection left idle, as Qt leaves the ones it opens ahead of time,
// gets a real answer or a clean close after 65 s: never an unsolicited
// 408, which the GUI would take for the reply to its next request.
func TestAnIdleConnectionIsNeverAnswered408(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("waits 65 s")
	}
	serve := func(quiet bool) string {
		app := bareApp(t, false)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		if quiet {
			go app.Listener(api.QuietIdle(ln))
		} else {
			go app.Listener(ln)
		}
		t.Cleanup(func() { app.Shutdown() })
		return ln.Addr().String()
	}
	quiet, plain := serve(true), serve(false)
	dial := func(addr string) net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	const get = "GET /v2/version HTTP/1.1\r\nHost: x\r\nUser-Agent: GNS3 QT Client v2.2.60\r\n\r\n"
	never := dial(quiet) // opened ahead of time, nothing sent
	used := dial(quiet)  // one request, then idle (keep-alive)
	control := dial(plain)
	io.WriteString(used, get)
	if resp, err := http.ReadResponse(bufio.NewReader(used), nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("first request: %v %v", resp, err)
	}
	time.Sleep(65 * time.Second)
	var wg sync.WaitGroup
	results := make([]string, 3)
	for i, c := range []net.Conn{never, used, control} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			io.WriteString(c, get) // may fail: the server closed it
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			data, _ := io.ReadAll(c)
			results[i] = string(data)
		}()
	}
	wg.Wait()
	for i, name := range []string{"never used", "idle after a request"} {
		got := results[i]
		if got != "" && !strings.HasPrefix(got, "HTTP/1.1 200") {
			t.Errorf("%s connection: %.80q, want a 200 or a clean close", name, got)
		}
	}
	// What the GUI met before: fasthttp's own 408 (the test sees the bug).
	if !strings.HasPrefix(results[2], "HTTP/1.1 408") {
		t.Logf("unwrapped listener answered %.40q", results[2])
	}
}
