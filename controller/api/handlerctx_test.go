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
