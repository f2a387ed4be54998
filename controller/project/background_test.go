package project

import (
	"context"
	"testing"
	"time"
)

// startBlocks is fakeComputes whose node starts wait until their context
// ends: an agent that never answers.
type startBlocks struct {
	*fakeComputes
	started, ended chan struct{}
}

func (b startBlocks) SetNodeStatus(ctx context.Context, c, p, id, status string) (NodeRuntime, error) {
	if status != "started" {
		return b.fakeComputes.SetNodeStatus(ctx, c, p, id, status)
	}
	close(b.started)
	<-ctx.Done()
	close(b.ended)
	return NodeRuntime{}, ctx.Err()
}

func TestCloseCancelsAndWaitsForAProjectsAutoStart(t *testing.T) {
	f := newFixture(t)
	f.node(t, "PC1")
	on := true
	if _, err := f.svc.UpdateProject(t.Context(), f.project.ID, ProjectUpdate{SettingsUpdate: SettingsUpdate{AutoStart: &on}}); err != nil {
		t.Fatal(err)
	}
	if err := f.svc.CloseProject(t.Context(), f.project.ID); err != nil {
		t.Fatal(err)
	}
	b := startBlocks{f.computes, make(chan struct{}), make(chan struct{})}
	f.svc.core.cfg.Computes = b
	if _, err := f.svc.OpenProject(t.Context(), f.project.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case <-b.started: // the auto-start runs after the open has answered
	case <-time.After(time.Minute):
		t.Fatal("the project's nodes were not auto-started")
	}
	f.svc.Close()
	select {
	case <-b.ended:
	default:
		t.Fatal("Close returned while the auto-start still ran")
	}
	f.svc.Close() // twice: harmless
}
