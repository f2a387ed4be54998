package api

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"
)

// done waits (without any bound on speed) for ctx to end and returns its
// error; a context that is not done within a minute fails the test.
func done(t *testing.T, ctx context.Context) error {
	t.Helper()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Minute):
		t.Fatal("the context did not end")
		return nil
	}
}

func TestARequestContextEndsAtItsDeadline(t *testing.T) {
	before := time.Now()
	rc := newRequestContext(t.Context(), time.Now(), 20*time.Millisecond)
	defer rc.end()
	if d, ok := rc.Deadline(); !ok || d.Before(before.Add(20*time.Millisecond)) || d.After(time.Now().Add(20*time.Millisecond)) {
		t.Fatalf("deadline %v %v, want 20ms after the request began", d, ok)
	}
	if err := rc.Err(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v", err)
	}
	if err := done(t, rc); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want the deadline's", err)
	}
	// A context first asked after its deadline is done at once.
	late := newRequestContext(t.Context(), time.Now(), time.Nanosecond)
	defer late.end()
	time.Sleep(time.Millisecond)
	if err := late.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("asked after its deadline: err %v", err)
	}
}

func TestARequestContextEndsWhenTheServerStops(t *testing.T) {
	for _, askFirst := range []bool{true, false} {
		server, stop := context.WithCancel(context.WithValue(t.Context(), "k", "v"))
		// Value makes the real context: asked of another, so that rc's is
		// made after the stop when askFirst is false.
		other := newRequestContext(server, time.Now(), time.Hour)
		defer other.end()
		if other.Value("k") != "v" {
			t.Fatalf("value %v, want the server context's", other.Value("k"))
		}
		rc := newRequestContext(server, time.Now(), time.Hour)
		if d, _ := rc.Deadline(); time.Until(d) < 59*time.Minute {
			t.Fatalf("deadline %v, want an hour on", d)
		}
		var child context.Context
		if askFirst {
			if rc.Err() != nil {
				t.Fatal("done before the server stopped")
			}
			var cancel context.CancelFunc
			child, cancel = context.WithCancel(rc)
			defer cancel()
		}
		stop()
		if err := done(t, rc); !errors.Is(err, context.Canceled) {
			t.Fatalf("asked first %v: err %v", askFirst, err)
		}
		if child != nil {
			if err := done(t, child); !errors.Is(err, context.Canceled) {
				t.Fatalf("a context made of it: err %v", err)
			}
		}
		rc.end()
	}
}

func TestARequestContextEndsWhenTheRequestIsAnswered(t *testing.T) {
	// Asked while the request runs, and only after.
	rc := newRequestContext(t.Context(), time.Now(), time.Hour)
	child, cancel := context.WithCancel(rc)
	defer cancel()
	rc.end()
	if err := done(t, child); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
	rc = newRequestContext(t.Context(), time.Now(), time.Hour)
	rc.end()
	if err := done(t, rc); !errors.Is(err, context.Canceled) {
		t.Fatalf("asked after the answer: err %v", err)
	}
}

// Every route's handler gets a request context that ends with the request.
func TestAHandlersContextIsTheRequestsAndEndsWithIt(t *testing.T) {
	app := fiber.New()
	a := &API{cfg: Config{Context: t.Context(), RequestTimeout: time.Hour}}
	got := make(chan context.Context, 1)
	a.handle(app, "GET", "/v2/x", func(c *fiber.Ctx) error {
		if d, ok := c.UserContext().Deadline(); !ok || time.Until(d) < 59*time.Minute {
			t.Errorf("deadline %v %v, want RequestTimeout on", d, ok)
		}
		got <- c.UserContext()
		return c.SendString("ok")
	})
	a.addRoutes(app)
	var ctx fasthttp.RequestCtx
	ctx.Init(&fasthttp.Request{}, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}, nil)
	ctx.Request.Header.SetMethod("GET")
	ctx.Request.SetRequestURI("/v2/x")
	app.Handler()(&ctx)
	if string(ctx.Response.Body()) != "ok" {
		t.Fatalf("reply %d %s", ctx.Response.StatusCode(), ctx.Response.Body())
	}
	if err := done(t, <-got); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
}
