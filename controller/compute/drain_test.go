package compute

import (
	"net"
	"path/filepath"
	"testing"
	"time"
)

// A drained compute stays drained across the controller's restart, and
// placement sees it so.
func TestADrainedComputeIsSavedDrained(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close() // the agent need not answer
	path := filepath.Join(t.TempDir(), "computes.json")
	client := func() *Client { return NewClient(ClientConfig{Retries: 0, Timeout: time.Second}) }
	r := NewRegistry(RegistryConfig{Path: path, Client: client()})
	if _, err := r.Create(t.Context(), Compute{ID: "far", Name: "far", Protocol: "http", Host: "127.0.0.1", Port: port}, Grant{}); err != nil {
		t.Fatal(err)
	}
	if c, err := r.SetDraining("far", true); err != nil || !c.Draining {
		t.Fatalf("drain: %+v, %v", c, err)
	}
	if _, err := r.SetDraining("nowhere", true); err == nil {
		t.Fatal("an unknown compute was drained")
	}
	reloaded := NewRegistry(RegistryConfig{Path: path, Client: client()})
	if err := reloaded.Load(t.Context()); err != nil {
		t.Fatal(err)
	}
	rooms := reloaded.Agents.Rooms()
	if len(rooms) != 1 || !rooms[0].Draining || !reloaded.Agents.Draining("far") {
		t.Fatalf("after a restart: %+v", rooms)
	}
	if _, err := reloaded.SetDraining("far", false); err != nil {
		t.Fatal(err)
	}
	again := NewRegistry(RegistryConfig{Path: path, Client: client()})
	if err := again.Load(t.Context()); err != nil {
		t.Fatal(err)
	}
	if again.Agents.Draining("far") {
		t.Fatal("undrained, yet drained after a restart")
	}
}
