package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestProjectsSurviveSIGKILLWhileBeingWritten kills the controller with
// SIGKILL while a client changes projects as fast as it can, restarts it on
// the same data directory, and checks that every project loads with every
// change the controller had acknowledged. It does so three times, killing
// at a different moment each round.
func TestProjectsSurviveSIGKILLWhileBeingWritten(t *testing.T) {
	data := t.TempDir()
	acked := map[string]int{} // project id → last zoom the controller acknowledged
	for round := range 3 {
		c := startControllerIn(t, data)
		// Everything acknowledged before is there.
		for id, zoom := range acked {
			var p struct {
				Zoom   int    `json:"zoom"`
				Status string `json:"status"`
			}
			c.call("GET", "/v2/projects/"+id, nil, 200, &p)
			// The change in flight at the kill may or may not have landed.
			if p.Zoom != zoom && p.Zoom != zoom+1 {
				t.Fatalf("round %d: project %s has zoom %d, the last acknowledged was %d", round, id, p.Zoom, zoom)
			}
			acked[id] = p.Zoom
		}
		// A project being created at the kill may have landed unacknowledged:
		// at most one more, and it must load whole.
		var projects []struct {
			ProjectID string `json:"project_id"`
			Zoom      int    `json:"zoom"`
		}
		c.call("GET", "/v2/projects", nil, 200, &projects)
		if len(projects) < len(acked) || len(projects) > len(acked)+1 {
			t.Fatalf("round %d: %d projects loaded, %d were acknowledged", round, len(projects), len(acked))
		}
		for _, p := range projects {
			if _, ok := acked[p.ProjectID]; !ok {
				acked[p.ProjectID] = p.Zoom
			}
		}

		var mu sync.Mutex
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			var id string
			for i := 1; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if i%20 == 1 { // now and then, a new project
					var p struct {
						ProjectID string `json:"project_id"`
					}
					if post(c.url+"/v2/projects", map[string]any{"name": fmt.Sprintf("r%d-p%d", round, i)}, 201, &p) != nil {
						return // the controller is gone
					}
					id = p.ProjectID
					mu.Lock()
					acked[id] = 100
					mu.Unlock()
					continue
				}
				mu.Lock()
				zoom := acked[id] + 1
				mu.Unlock()
				if put(c.url+"/v2/projects/"+id, map[string]any{"zoom": zoom}) != nil {
					return
				}
				mu.Lock()
				acked[id] = zoom
				mu.Unlock()
			}
		}()
		time.Sleep(time.Duration(300+round*350) * time.Millisecond)
		c.cmd.Process.Kill() // SIGKILL: no chance to clean up
		<-c.done
		close(stop)
		<-done
	}
}

// post sends a JSON POST; any failure (the controller killed) is an error.
func post(url string, body any, want int, out any) error {
	data, _ := json.Marshal(body)
	resp, err := http.Post(url, "application/json", bytes.NewReader(data))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != want {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

func put(url string, body any) error {
	data, _ := json.Marshal(body)
	return send("PUT", url, bytes.NewReader(data), 200)
}

// TestNodeMovesSurviveSIGKILL moves nodes of one project, one after the
// other, and kills the controller: every move it acknowledged is in the
// project file it loads again. Save writes only the entries that changed
// (topology/incremental.go), so this also holds it to writing each moved
// node's entry, whichever node moved last.
func TestNodeMovesSurviveSIGKILL(t *testing.T) {
	data := t.TempDir()
	c := startControllerIn(t, data)
	var p struct {
		ProjectID string `json:"project_id"`
	}
	c.call("POST", "/v2/projects", map[string]any{"name": "moves"}, 201, &p)
	const n = 24
	ids := make([]string, n)
	for i := range ids {
		var node struct {
			NodeID string `json:"node_id"`
		}
		c.call("POST", "/v2/projects/"+p.ProjectID+"/nodes", map[string]any{
			"name": fmt.Sprintf("SW%d", i), "node_type": "ethernet_switch", "compute_id": "local", "x": 0, "y": 0}, 201, &node)
		ids[i] = node.NodeID
	}
	acked := make([]int, n)  // last x acknowledged, per node
	flight := make([]int, n) // x being sent, per node
	var mu sync.Mutex
	done := make(chan struct{})
	go func() {
		defer close(done)
		for k := 1; ; k++ {
			i := (k * 7) % n
			mu.Lock()
			flight[i] = k
			mu.Unlock()
			if put(c.url+"/v2/projects/"+p.ProjectID+"/nodes/"+ids[i], map[string]any{"x": k}) != nil {
				return // the controller is gone
			}
			mu.Lock()
			acked[i] = k
			mu.Unlock()
		}
	}()
	time.Sleep(1500 * time.Millisecond)
	c.cmd.Process.Kill()
	<-c.done
	<-done

	c = startControllerIn(t, data)
	c.call("POST", "/v2/projects/"+p.ProjectID+"/open", nil, 201, nil)
	var nodes []struct {
		NodeID string `json:"node_id"`
		X      int    `json:"x"`
	}
	c.call("GET", "/v2/projects/"+p.ProjectID+"/nodes", nil, 200, &nodes)
	if len(nodes) != n {
		t.Fatalf("%d nodes loaded, %d were created", len(nodes), n)
	}
	moved := 0
	for _, node := range nodes {
		i := slices.Index(ids, node.NodeID)
		if i < 0 {
			t.Fatalf("unknown node %s loaded", node.NodeID)
		}
		if node.X != acked[i] && node.X != flight[i] {
			t.Errorf("node %d at x=%d; its last acknowledged move was to %d (in flight: %d)", i, node.X, acked[i], flight[i])
		}
		if acked[i] > 0 {
			moved++
		}
	}
	if moved < n/2 {
		t.Fatalf("only %d nodes moved before the kill: the test proves little", moved)
	}
}

// TestConcurrentChangesSurviveSIGKILL changes one project from several
// clients at once (node moves, nodes made and deleted, drawings made, the
// project's zoom), so that the changes share the journal's flushes, kills
// the controller with SIGKILL amid them, and checks that the project
// loads with every change the controller acknowledged; a change in flight
// may or may not be there.
func TestConcurrentChangesSurviveSIGKILL(t *testing.T) {
	data := t.TempDir()
	c := startControllerIn(t, data)
	var p struct {
		ProjectID string `json:"project_id"`
	}
	c.call("POST", "/v2/projects", map[string]any{"name": "busy"}, 201, &p)
	base := c.url + "/v2/projects/" + p.ProjectID
	const movers, perMover = 3, 4
	ids := make([]string, movers*perMover)
	for i := range ids {
		var node struct {
			NodeID string `json:"node_id"`
		}
		c.call("POST", "/v2/projects/"+p.ProjectID+"/nodes", map[string]any{
			"name": fmt.Sprintf("SW%d", i), "node_type": "ethernet_switch", "compute_id": "local", "x": 0, "y": 0}, 201, &node)
		ids[i] = node.NodeID
	}

	var mu sync.Mutex
	acked := make([]int, len(ids))  // last x acknowledged, per node
	flight := make([]int, len(ids)) // x being sent, per node
	made := map[string]bool{}       // node id → deleted (acknowledged)
	var makingName string           // node being made when the kill came
	var deleting string             // node being deleted when the kill came
	drawings := map[string]bool{}   // drawing ids acknowledged
	zoom, zoomFlight := 100, 100
	var wg sync.WaitGroup
	for m := range movers {
		wg.Go(func() {
			for k := 1; ; k++ {
				i := m*perMover + k%perMover
				mu.Lock()
				flight[i] = k
				mu.Unlock()
				if put(base+"/nodes/"+ids[i], map[string]any{"x": k}) != nil {
					return
				}
				mu.Lock()
				acked[i] = k
				mu.Unlock()
			}
		})
	}
	wg.Go(func() { // nodes made, and every other one deleted
		for k := 0; ; k++ {
			name := fmt.Sprintf("tmp%d", k)
			mu.Lock()
			makingName = name
			mu.Unlock()
			var node struct {
				NodeID string `json:"node_id"`
			}
			if post(base+"/nodes", map[string]any{"name": name, "node_type": "ethernet_switch", "compute_id": "local"}, 201, &node) != nil {
				return
			}
			mu.Lock()
			made[node.NodeID] = false
			mu.Unlock()
			if k%2 == 1 {
				mu.Lock()
				deleting = node.NodeID
				mu.Unlock()
				if del(base+"/nodes/"+node.NodeID) != nil {
					return
				}
				mu.Lock()
				made[node.NodeID] = true
				mu.Unlock()
			}
		}
	})
	wg.Go(func() { // drawings
		for k := 0; ; k++ {
			var d struct {
				DrawingID string `json:"drawing_id"`
			}
			if post(base+"/drawings", map[string]any{"svg": fmt.Sprintf(`<svg height="10" width="%d"><rect/></svg>`, 10+k), "x": k}, 201, &d) != nil {
				return
			}
			mu.Lock()
			drawings[d.DrawingID] = true
			mu.Unlock()
		}
	})
	wg.Go(func() { // the project's zoom
		for k := 101; ; k++ {
			mu.Lock()
			zoomFlight = k
			mu.Unlock()
			if put(base, map[string]any{"zoom": k}) != nil {
				return
			}
			mu.Lock()
			zoom = k
			mu.Unlock()
		}
	})
	time.Sleep(1500 * time.Millisecond)
	c.cmd.Process.Kill()
	<-c.done
	wg.Wait()
	journal, err := os.Stat(filepath.Join(data, "projects", p.ProjectID, "busy.gns3.journal"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("journal at the kill: %d bytes", journal.Size())

	t0 := time.Now()
	c = startControllerIn(t, data)
	t.Logf("restart %s", time.Since(t0))
	var proj struct {
		Zoom int `json:"zoom"`
	}
	c.call("GET", "/v2/projects/"+p.ProjectID, nil, 200, &proj)
	if proj.Zoom != zoom && proj.Zoom != zoomFlight {
		t.Errorf("zoom %d; the last acknowledged was %d (in flight: %d)", proj.Zoom, zoom, zoomFlight)
	}
	t0 = time.Now()
	c.call("POST", "/v2/projects/"+p.ProjectID+"/open", nil, 201, nil)
	t.Logf("open %s", time.Since(t0))
	var nodes []struct {
		NodeID string `json:"node_id"`
		Name   string `json:"name"`
		X      int    `json:"x"`
	}
	c.call("GET", "/v2/projects/"+p.ProjectID+"/nodes", nil, 200, &nodes)
	seen := map[string]bool{}
	moved := 0
	for _, n := range nodes {
		seen[n.NodeID] = true
		if i := slices.Index(ids, n.NodeID); i >= 0 {
			if n.X != acked[i] && n.X != flight[i] {
				t.Errorf("node %d at x=%d; its last acknowledged move was to %d (in flight: %d)", i, n.X, acked[i], flight[i])
			}
			if acked[i] > 0 {
				moved++
			}
			continue
		}
		if deleted, ok := made[n.NodeID]; ok {
			if deleted {
				t.Errorf("node %s (%s) is back; its deletion was acknowledged", n.NodeID, n.Name)
			}
			continue
		}
		if n.Name != makingName { // the one made at the kill may be there, unacknowledged
			t.Errorf("unknown node %s (%s) loaded", n.NodeID, n.Name)
		}
	}
	for i, id := range ids {
		if !seen[id] {
			t.Errorf("node %d is gone", i)
		}
	}
	for id, deleted := range made {
		if !deleted && !seen[id] && id != deleting {
			t.Errorf("node %s is gone; it was made (acknowledged) and never deleted", id)
		}
	}
	var ds []struct {
		DrawingID string `json:"drawing_id"`
	}
	c.call("GET", "/v2/projects/"+p.ProjectID+"/drawings", nil, 200, &ds)
	got := map[string]bool{}
	for _, d := range ds {
		got[d.DrawingID] = true
	}
	for id := range drawings {
		if !got[id] {
			t.Errorf("drawing %s is gone; it was acknowledged", id)
		}
	}
	if len(ds) > len(drawings)+1 {
		t.Errorf("%d drawings loaded, %d were acknowledged", len(ds), len(drawings))
	}
	t.Logf("%d moves, %d nodes made, %d drawings", slices.Max(acked), len(made), len(drawings))
	if moved < len(ids)/2 || len(made) < 4 || len(drawings) < 4 {
		t.Fatalf("%d nodes moved, %d made, %d drawings before the kill: the test proves little", moved, len(made), len(drawings))
	}
}

func del(url string) error { return send("DELETE", url, nil, 204) }

// send makes a request whose reply has no body the test reads; any
// failure (the controller killed) or another status is an error.
func send(method, url string, body io.Reader, want int) error {
	req, _ := http.NewRequest(method, url, body)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != want {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

// TestAStoppedControllerLeavesWholeProjectFiles: changes go to a journal
// beside the .gns3 first; once the controller stops (SIGTERM), the .gns3
// itself holds them, for GNS3 and the tools that read it.
func TestAStoppedControllerLeavesWholeProjectFiles(t *testing.T) {
	data := t.TempDir()
	c := startControllerIn(t, data)
	var p struct {
		ProjectID string `json:"project_id"`
	}
	c.call("POST", "/v2/projects", map[string]any{"name": "whole"}, 201, &p)
	var node struct {
		NodeID string `json:"node_id"`
	}
	c.call("POST", "/v2/projects/"+p.ProjectID+"/nodes", map[string]any{
		"name": "SW1", "node_type": "ethernet_switch", "compute_id": "local", "x": 0, "y": 0}, 201, &node)
	c.call("PUT", "/v2/projects/"+p.ProjectID+"/nodes/"+node.NodeID, map[string]any{"x": 321}, 200, nil)
	c.stop()
	data2, err := os.ReadFile(filepath.Join(data, "projects", p.ProjectID, "whole.gns3"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Topology struct {
			Nodes []struct {
				X int `json:"x"`
			} `json:"nodes"`
		} `json:"topology"`
	}
	if err := json.Unmarshal(data2, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Topology.Nodes) != 1 || f.Topology.Nodes[0].X != 321 {
		t.Fatalf("the stopped controller's project file has nodes %+v, want one at x=321", f.Topology.Nodes)
	}
}
