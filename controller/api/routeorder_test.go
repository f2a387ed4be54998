package api

import (
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"
)

type stubView struct{ View }

// Adding the polled routes first changes nothing but speed: each request
// goes to the route it went to with the routes added in the order they
// were registered. The paths asked are every route's template with its
// placeholders filled by "x" or by the fixed segment another route has
// there: the paths two routes could share.
func TestRoutesAnswerAsTheirOrderInTheTableSays(t *testing.T) {
	var app *fiber.App
	build := func() (func(method, path string) string, []Route) {
		var a *API
		var err error
		app, a, err = New(Config{Context: t.Context(), View: stubView{}, Metrics: http.NotFoundHandler()})
		if err != nil {
			t.Fatal(err)
		}
		handler := app.Handler()
		var ctx fasthttp.RequestCtx
		ctx.Init(&fasthttp.Request{}, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}, nil)
		return func(method, path string) string {
			ctx.Request.Reset()
			ctx.Response.Reset()
			ctx.Request.Header.SetMethod(method)
			ctx.Request.SetRequestURI(path)
			handler(&ctx)
			return string(ctx.Response.Header.Peek("X-Route"))
		}, a.routes
	}
	saved := polled
	polled = nil
	inOrder, _ := build()
	polled = saved
	route, routes := build()
	asked := map[string]bool{}
	for _, r := range routes {
		ts := strings.Split(r.Template, "/")
		for _, o := range routes {
			os := strings.Split(o.Template, "/")
			ps := make([]string, len(ts))
			for i, seg := range ts {
				switch {
				case !strings.HasPrefix(seg, "{"):
					ps[i] = seg
				case i < len(os) && !strings.HasPrefix(os[i], "{"):
					ps[i] = os[i]
				default:
					ps[i] = "x"
				}
			}
			path := strings.Join(ps, "/")
			if asked[r.Method+" "+path] {
				continue
			}
			asked[r.Method+" "+path] = true
			if got, want := route(r.Method, path), inOrder(r.Method, path); got != want {
				t.Errorf("%s %s went to %q, want %q", r.Method, path, got, want)
			}
		}
	}
	if len(asked) < 2*len(routes) {
		t.Fatalf("only %d paths asked for %d routes", len(asked), len(routes))
	}
	for _, p := range polled {
		if !slices.Contains(routes, p) {
			t.Errorf("polled route %v is not a route", p)
		}
	}
	// And Fiber was given the link first: the first /v2 route it tries.
	for _, stack := range app.Stack() {
		for _, r := range stack {
			if r.Method == "GET" && strings.HasPrefix(r.Path, "/v2") {
				if r.Path != fiberPath(polled[0].Template) {
					t.Errorf("the first GET route Fiber tries is %s", r.Path)
				}
				break
			}
		}
	}
	if got := route("GET", "/v2/projects/p/links/l"); got != polled[0].Template {
		t.Fatalf("GET link went to %q", got)
	}
}
