package project

import (
	"fmt"
	"sync"
	"testing"

	"github.com/labtap/labtap/capspec"
)

// A link's rendering is made once while nothing changes, again after a
// change of the project, and each time while its capture runs (its counts
// move on their own).
func TestARenderedLinkIsMadeAgainOnlyAfterAChange(t *testing.T) {
	f := newFixture(t)
	a, b := f.node(t, "A"), f.node(t, "B")
	for _, n := range []Node{a, b} {
		if _, err := f.svc.Nodes.Start(t.Context(), f.project.ID, n.ID); err != nil {
			t.Fatal(err)
		}
	}
	l := f.link(t, a, b)
	renders := 0
	render := func(l Link) ([]byte, error) {
		renders++
		return fmt.Appendf(nil, "suspend=%v frames=%d #%d", l.Suspend, l.Capture.Frames, renders), nil
	}
	get := func() string {
		t.Helper()
		b, err := f.svc.Captures.RenderedLink(t.Context(), f.project.ID, l.ID, render)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if a, b := get(), get(); a != "suspend=false frames=0 #1" || b != a {
		t.Fatalf("two GETs of an unchanged link: %q, %q", a, b)
	}
	suspend := true
	if _, err := f.svc.Links.Update(t.Context(), f.project.ID, l.ID, LinkUpdate{Suspend: &suspend}); err != nil {
		t.Fatal(err)
	}
	if a, b := get(), get(); a != "suspend=true frames=0 #2" || b != a {
		t.Fatalf("after the update: %q, %q", a, b)
	}
	if _, err := f.svc.Captures.Start(t.Context(), f.project.ID, l.ID, capspec.Spec{}); err != nil {
		t.Fatal(err)
	}
	if a, b := get(), get(); a != "suspend=true frames=7 #3" || b != "suspend=true frames=7 #4" {
		t.Fatalf("while capturing: %q, %q", a, b)
	}
	if _, err := f.svc.Captures.RenderedLink(t.Context(), f.project.ID, "nope", render); err == nil {
		t.Fatal("a link that does not exist was rendered")
	}
}

// Under changes racing with GETs, a GET after the last change shows it.
func TestARenderedLinkFollowsConcurrentChanges(t *testing.T) {
	f := newFixture(t)
	l := f.link(t, f.node(t, "A"), f.node(t, "B"))
	render := func(l Link) ([]byte, error) { return fmt.Appendf(nil, "suspend=%v", l.Suspend), nil }
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 200 {
				if _, err := f.svc.Captures.RenderedLink(t.Context(), f.project.ID, l.ID, render); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	for i := range 101 {
		suspend := i%2 == 0
		if _, err := f.svc.Links.Update(t.Context(), f.project.ID, l.ID, LinkUpdate{Suspend: &suspend}); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	b, err := f.svc.Captures.RenderedLink(t.Context(), f.project.ID, l.ID, render)
	if err != nil || string(b) != "suspend=true" {
		t.Fatalf("after the last change (suspend): %q, %v", b, err)
	}
}
