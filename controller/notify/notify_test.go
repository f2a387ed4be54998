package notify

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"
)

func newHub(t testing.TB, cfg Config) *Hub {
	h := New(cfg)
	t.Cleanup(h.Close)
	return h
}

func TestSubscribersGetTheirStreamInOrder(t *testing.T) {
	h := newHub(t, Config{})
	a, b := h.Subscribe("p1"), h.Subscribe("p1")
	other, ctl := h.Subscribe("p2"), h.Subscribe(Controller)
	for i := range 100 {
		h.Publish("p1", []byte(fmt.Sprint(i)))
	}
	h.Publish(Controller, []byte("project.created"))
	for _, s := range []*Sub{a, b} {
		for i := range 100 {
			if got := string((<-s.C).Data); got != fmt.Sprint(i) {
				t.Fatalf("message %d = %q", i, got)
			}
		}
	}
	select {
	case m := <-other.C:
		t.Fatalf("another project's stream got %q", m)
	default:
	}
	if got := string((<-ctl.C).Data); got != "project.created" {
		t.Fatalf("controller stream got %q", got)
	}
}

func TestASubscriberThatFallsBehindIsDroppedAndOthersKeepGoing(t *testing.T) {
	h := newHub(t, Config{Queue: 8})
	stalled, healthy := h.Subscribe("p"), h.Subscribe("p")
	for i := range 100 {
		h.Publish("p", []byte(fmt.Sprint(i)))
		if got := string((<-healthy.C).Data); got != fmt.Sprint(i) {
			t.Fatalf("healthy subscriber got %q, want %d", got, i)
		}
	}
	n := 0
	for range stalled.C { // drains the 8 queued, then sees the close
		n++
	}
	if n != 8 {
		t.Fatalf("stalled subscriber got %d messages before being dropped, want 8", n)
	}
	if h.Count("p") != 1 {
		t.Fatalf("Count = %d, want 1", h.Count("p"))
	}
	h.Unsubscribe(stalled) // after a drop: harmless
	h.Unsubscribe(healthy)
	h.Unsubscribe(healthy)
}

func TestIdleIsReportedOnlyAfterTheGraceWithNoListener(t *testing.T) {
	// In a synctest bubble the clock moves only when every goroutine waits:
	// the grace is exact, and the test takes no time.
	synctest.Test(t, func(t *testing.T) {
		const grace = 5 * time.Second
		idle := make(chan string, 4)
		h := New(Config{IdleGrace: grace, OnIdle: func(p string) { idle <- p }})
		defer h.Close()
		noIdle := func(why string) {
			t.Helper()
			synctest.Wait()
			select {
			case p := <-idle:
				t.Fatalf("idle %q %s", p, why)
			default:
			}
		}
		a, b := h.Subscribe("p"), h.Subscribe("p")
		c := h.Subscribe(Controller)
		h.Unsubscribe(a)
		h.Unsubscribe(c) // the controller stream never goes idle
		time.Sleep(10 * grace)
		noIdle("with a listener left")
		// The last listener leaves, and another comes back within the
		// grace: a browser reloading its page keeps its project open.
		h.Unsubscribe(b)
		time.Sleep(grace - time.Millisecond)
		back := h.Subscribe("p")
		time.Sleep(10 * grace)
		noIdle("after a listener came back within the grace")
		left := time.Now()
		h.Unsubscribe(back)
		time.Sleep(grace - time.Millisecond)
		noIdle("before the grace was over")
		if p := <-idle; p != "p" || time.Since(left) != grace {
			t.Fatalf("idle %q %s after the last listener left, want %s", p, time.Since(left), grace)
		}
	})
}

func TestPublishAllReachesEveryProjectButNotTheController(t *testing.T) {
	h := newHub(t, Config{})
	p1, p2, ctl := h.Subscribe("p1"), h.Subscribe("p2"), h.Subscribe(Controller)
	h.PublishAll([]byte("log"))
	h.Publish(Controller, []byte("after"))
	if string((<-p1.C).Data) != "log" || string((<-p2.C).Data) != "log" {
		t.Fatal("a project stream missed the message")
	}
	if m := <-ctl.C; string(m.Data) != "after" {
		t.Fatalf("controller stream got %q", m)
	}
}

func TestASubscriberGetsNothingPublishedBeforeIt(t *testing.T) {
	h := newHub(t, Config{})
	h.Publish("p", []byte("before"))
	s := h.Subscribe("p")
	h.Publish("p", []byte("after"))
	if m := <-s.C; string(m.Data) != "after" {
		t.Fatalf("got %q", m)
	}
}

func TestWhenTheDispatcherFallsBehindEveryListenerIsDroppedNotLied(t *testing.T) {
	h := newHub(t, Config{Queue: 1})
	s := h.Subscribe("p")
	// The listener reads everything it is given, so its own queue never
	// overflows: only the dispatcher's missed message can end its stream.
	got := make(chan bool)
	go func() {
		for range s.C {
		}
		close(got)
	}()
	// Hold the dispatcher so its queue (4 × Queue) fills up.
	h.mu.Lock()
	for range 10 {
		h.Publish("p", []byte("x"))
	}
	h.mu.Unlock()
	// The subscriber may get a message or two, then its stream ends: it
	// never sees a stream with a hole in it.
	select {
	case <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("a listener that missed messages was not dropped")
	}
}

func TestCloseEndsEveryStream(t *testing.T) {
	h := New(Config{})
	s := h.Subscribe("p")
	h.Close()
	h.Close()
	if _, ok := <-s.C; ok {
		t.Fatal("stream still open after Close")
	}
	h.Publish("p", []byte("late")) // no panic, goes nowhere
	if _, ok := <-h.Subscribe("p").C; ok {
		t.Fatal("a subscription after Close is open")
	}
}

// BenchmarkPublishToThousandSubscribers measures what a publisher (an API
// call emitting an event) pays with 1,000 listeners on the project, each
// draining its queue.
func BenchmarkPublishToThousandSubscribers(b *testing.B) {
	h := newHub(b, Config{Queue: 1 << 16})
	done := make(chan struct{})
	for range 1000 {
		s := h.Subscribe("p")
		go func() {
			for range s.C {
			}
			done <- struct{}{}
		}()
	}
	msg := []byte(`{"action": "link.updated", "event": {"capturing": true}}`)
	b.ReportAllocs()
	for b.Loop() {
		h.Publish("p", msg)
	}
	b.StopTimer()
	h.Close()
	for range 1000 {
		<-done
	}
}
