package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/labtap/labtap/internal/testenv"
)

// In a real browser, on a controller with authentication on: the
// controller's own page, once its user has given the credentials, reads
// the API and opens its notification WebSocket (the browser sends the
// credentials it holds for the origin); a page of another origin, in the
// same browser, can neither create a project with a text/plain POST nor
// open a WebSocket, though the browser holds the credentials.
func TestSecurityABrowserPageOfAnotherOriginCannotDriveTheAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the controller and runs a browser")
	}
	testenv.RequireTools(t, "chromium")
	const user, password = "admin", "browser-pw"
	c := startControllerWith(t, t.TempDir(), []string{"LABTAP_USER=" + user, "LABTAP_PASSWORD=" + password})
	c.user, c.password = user, password
	c.call("POST", "/v2/projects", map[string]any{"name": "mine"}, 201, nil)
	ctx := browser(t)

	// The user answers the prompt (here, in the URL) on the controller's page.
	// The browser keeps them for the origin; the page itself is then
	// loaded without them in its URL (fetch refuses such a base).
	own := strings.Replace(c.url, "http://", "http://"+user+":"+password+"@", 1) + "/"
	if err := chromedp.Run(ctx, chromedp.Navigate(own), chromedp.Navigate(c.url+"/")); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, `document.body.textContent.includes("mine")`)
	const openWS = `(url) => new Promise((done) => {
		const ws = new WebSocket(url);
		ws.onopen = () => { ws.close(); done("open"); };
		ws.onerror = () => done("refused");
	})`
	wsURL := "ws" + strings.TrimPrefix(c.url, "http") + "/v2/notifications/ws"
	if got := awaitJS(t, ctx, fmt.Sprintf("(%s)(%q)", openWS, wsURL)); got != "open" {
		t.Fatalf("the controller's own page: WebSocket %s", got)
	}

	// Another origin: a page on another port of the same host.
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<!doctype html><title>elsewhere</title>")
	}))
	t.Cleanup(evil.Close)
	if err := chromedp.Run(ctx, chromedp.Navigate(evil.URL)); err != nil {
		t.Fatal(err)
	}
	post := fmt.Sprintf(`fetch(%q, {method: "POST", mode: "no-cors", credentials: "include",
		headers: {"Content-Type": "text/plain"}, body: '{"name": "csrf"}'}).then(() => "sent", (e) => "failed: " + e)`, c.url+"/v2/projects")
	if got := awaitJS(t, ctx, post); got != "sent" {
		t.Fatalf("the foreign page's POST: %s", got)
	}
	var projects []struct{ Name string }
	c.call("GET", "/v2/projects", nil, 200, &projects) // the POST was answered: fetch resolved
	for _, p := range projects {
		if p.Name == "csrf" {
			t.Error("the foreign page created a project")
		}
	}
	if got := awaitJS(t, ctx, fmt.Sprintf("(%s)(%q)", openWS, wsURL)); got != "refused" {
		t.Fatalf("the foreign page's WebSocket: %s", got)
	}
}

// awaitJS evaluates a JavaScript expression whose value is a promise of a
// string, and returns the string.
func awaitJS(t *testing.T, ctx context.Context, expr string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var s string
	awaitPromise := func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }
	if err := chromedp.Run(ctx, chromedp.Evaluate(expr, &s, awaitPromise)); err != nil {
		t.Fatalf("%.80s: %v", expr, err)
	}
	return s
}
