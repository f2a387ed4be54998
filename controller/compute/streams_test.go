package compute

import (
	"io"
	"strings"
	"testing"
	"testing/synctest"
)

func TestStreamsEndedWaitsForEveryStreamOfItsComputeOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var o openStreams
		a1 := o.track("a", io.NopCloser(strings.NewReader("")))
		a2 := o.track("a", io.NopCloser(strings.NewReader("")))
		b := o.track("b", io.NopCloser(strings.NewReader("")))
		defer b.Close()
		ended := make(chan error, 1)
		go func() { ended <- o.wait(t.Context(), "a") }()
		isEnded := func() bool {
			synctest.Wait()
			select {
			case <-ended:
				return true
			default:
				return false
			}
		}
		if isEnded() {
			t.Fatal("ended with two streams open")
		}
		a1.Close()
		a1.Close() // twice counts once
		if isEnded() {
			t.Fatal("ended with one stream open")
		}
		a2.Close()
		if !isEnded() {
			t.Fatal("not ended with every stream of a closed (b's stays open)")
		}
		if err := o.wait(t.Context(), "never"); err != nil {
			t.Fatalf("a compute without streams: %v", err)
		}
	})
}
