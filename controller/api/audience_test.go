package api

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/labtap/labtap/controller/access"
	"github.com/labtap/labtap/controller/notify"
)

// TestStreamsCarryOnlyWhatTheirUserMayAudit drives pump, the loop every
// notification stream runs, for a user with one project of two: it sends
// only that project's events (and those about nothing in particular),
// stops sending them once the ACE goes, and a project stream ends then.
func TestStreamsCarryOnlyWhatTheirUserMayAudit(t *testing.T) {
	ctx := context.Background()
	svc, err := access.Open(ctx, access.Config{Path: filepath.Join(t.TempDir(), "access.db"), BcryptCost: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	alice, err := svc.CreateUser(ctx, access.UserCreate{Username: "alice", Password: "alice-password"})
	if err != nil {
		t.Fatal(err)
	}
	var user string
	for _, r := range svc.Roles() {
		if r.Name == "User" {
			user = r.ID
		}
	}
	const mine, theirs = "11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222"
	ace, err := svc.CreateACE(ctx, access.ACESpec{Type: access.ACEUser, Path: "/projects/" + mine, UserID: alice.ID, RoleID: user, Propagate: true, Allowed: true})
	if err != nil {
		t.Fatal(err)
	}
	hub := notify.New(notify.Config{})
	t.Cleanup(hub.Close)
	h := notificationRoutes{hub: hub}
	au := audience{svc: svc, userID: alice.ID}

	run := func(stream string) (<-chan string, chan struct{}, chan struct{}) {
		sub := hub.Subscribe(stream)
		got := make(chan string, 64)
		done, ended := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(ended)
			defer hub.Unsubscribe(sub)
			h.pump(sub, func(msg []byte) bool { got <- string(msg); return true }, done, stream, au)
		}()
		<-got // the first ping
		return got, done, ended
	}
	next := func(got <-chan string) string {
		t.Helper()
		select {
		case m := <-got:
			return m
		case <-time.After(10 * time.Second):
			t.Fatal("no message")
			return ""
		}
	}

	ctl, stopCtl, ctlEnded := run(notify.Controller)
	defer func() { close(stopCtl); <-ctlEnded }()
	hub.PublishAbout(notify.Controller, "/projects/"+theirs, []byte("theirs"))
	hub.PublishAbout(notify.Controller, "/computes/local", []byte("compute"))
	hub.PublishAbout(notify.Controller, "/projects/"+mine, []byte("mine"))
	hub.Publish(notify.Controller, []byte("everyone"))
	// Her ACE is on her project only: computes are not hers to audit.
	for _, want := range []string{"mine", "everyone"} {
		if got := next(ctl); got != want {
			t.Fatalf("alice's controller stream: %q, want %q", got, want)
		}
	}

	proj, stopProj, projEnded := run(mine)
	defer close(stopProj)
	hub.PublishAbout(mine, "/projects/"+mine, []byte("node.updated"))
	if got := next(proj); got != "node.updated" {
		t.Fatalf("alice's project stream: %q", got)
	}

	if err := svc.DeleteACE(ctx, ace.ID); err != nil {
		t.Fatal(err)
	}
	hub.PublishAbout(notify.Controller, "/projects/"+mine, []byte("mine, no more"))
	hub.Publish(notify.Controller, []byte("everyone again"))
	if got := next(ctl); got != "everyone again" {
		t.Fatalf("alice's controller stream after her ACE went: %q", got)
	}
	hub.PublishAbout(mine, "/projects/"+mine, []byte("node.deleted"))
	select {
	case <-projEnded:
	case m := <-proj:
		t.Fatalf("the project stream went on after the ACE went: %q", m)
	case <-time.After(10 * time.Second):
		t.Fatal("the project stream did not end after the ACE went")
	}
}
