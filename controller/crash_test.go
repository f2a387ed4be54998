package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
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
	req, _ := http.NewRequest("PUT", url, bytes.NewReader(data))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
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
