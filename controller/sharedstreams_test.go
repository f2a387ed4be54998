package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fasthttp/websocket"
)

// streamLines opens a notification stream (JSON lines) as a user and
// returns its messages' actions and names, one string per message:
// "project.updated a1".
func streamLines(t *testing.T, url, auth string) <-chan string {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", auth)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("stream %s: %d %s", url, resp.StatusCode, b)
	}
	t.Cleanup(func() { resp.Body.Close() })
	// The first line, a ping, is sent once the stream listens.
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	if !sc.Scan() || !strings.Contains(sc.Text(), `"ping"`) {
		t.Fatalf("stream %s began with %q, %v", url, sc.Text(), sc.Err())
	}
	out := make(chan string, 1024)
	go func() {
		defer close(out)
		for sc.Scan() {
			var m struct {
				Action string `json:"action"`
				Event  struct {
					Name string `json:"name"`
				} `json:"event"`
			}
			if json.Unmarshal(sc.Bytes(), &m) == nil && m.Action != "ping" {
				out <- m.Action + " " + m.Event.Name
			}
		}
	}()
	return out
}

// streamFrames opens a notification WebSocket as a user, as the GNS3 GUI
// does (Basic credentials on the handshake), and returns its messages as
// streamLines does.
func streamFrames(t *testing.T, url, auth string) <-chan string {
	t.Helper()
	conn, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(url, "http"), http.Header{"Authorization": {auth}})
	if err != nil {
		t.Fatalf("WebSocket %s: %v %v", url, err, resp)
	}
	t.Cleanup(func() { conn.Close() })
	// The first message, a ping, is sent once the stream listens.
	if _, first, err := conn.ReadMessage(); err != nil || !strings.Contains(string(first), `"ping"`) {
		t.Fatalf("WebSocket %s began with %q, %v", url, first, err)
	}
	out := make(chan string, 1024)
	go func() {
		defer close(out)
		for {
			_, msg, err := conn.ReadMessage()
			if err != nil {
				return
			}
			var m struct {
				Action string `json:"action"`
				Event  struct {
					Name string `json:"name"`
				} `json:"event"`
			}
			if json.Unmarshal(msg, &m) == nil && m.Action != "ping" {
				out <- m.Action + " " + m.Event.Name
			}
		}
	}()
	return out
}

// readUntil reads a stream until want, and returns what came before it.
func readUntil(t *testing.T, s <-chan string, want string) []string {
	t.Helper()
	var before []string
	timeout := time.After(20 * time.Second)
	for {
		select {
		case m, ok := <-s:
			if !ok {
				t.Fatalf("the stream ended before %q; it carried %q", want, before)
			}
			if m == want {
				return before
			}
			before = append(before, m)
		case <-timeout:
			t.Fatalf("no %q on the stream; it carried %q", want, before)
		}
	}
}

// TestNotificationStreamsCarryOnlyTheCallersProjects runs two users, each
// with projects of their own: each, connecting as the GNS3 GUI 2.2.60
// does, lists only theirs, and each one's controller stream carries the
// events of their projects only; once an ACE is removed, the stream
// stops carrying that project's events, and a project stream ends.
func TestNotificationStreamsCarryOnlyTheCallersProjects(t *testing.T) {
	const adminPass = "admin-pw-1234"
	admin := basicAuthHeader("admin", adminPass)
	c := startControllerWith(t, t.TempDir(), []string{"LABTAP_USER=admin", "LABTAP_PASSWORD=" + adminPass}, "--local-agent=false")
	users := map[string]string{}
	projects := map[string]string{}
	aces := map[string]string{}
	for _, name := range []string{"alice", "bob"} {
		id := newUser(t, c, admin, name, name+"-pw-1234")
		users[name] = basicAuthHeader(name, name+"-pw-1234")
		for _, p := range []string{name + "-1", name + "-2"} {
			var reply struct {
				ProjectID string `json:"project_id"`
			}
			jsonCall(t, http.DefaultClient, "POST", c.url+"/v2/projects", admin, map[string]any{"name": p}, 201, &reply)
			projects[p] = reply.ProjectID
			aces[p] = grantRole(t, c, admin, id, "User", "/projects/"+reply.ProjectID)
		}
	}
	// Each one connects as the GNS3 GUI 2.2.60 does (its User-Agent, Basic
	// credentials on every request) and lists only their own projects.
	for name, auth := range users {
		for _, path := range []string{"/v2/version", "/v2/projects"} {
			req, _ := http.NewRequest("GET", c.url+path, nil)
			req.Header.Set("User-Agent", "GNS3 QT Client v2.2.60")
			req.Header.Set("Authorization", auth)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("%s: GET %s = %d %s", name, path, resp.StatusCode, body)
			}
			if path != "/v2/projects" {
				continue
			}
			var list []struct {
				Name string `json:"name"`
			}
			json.Unmarshal(body, &list)
			var names []string
			for _, p := range list {
				names = append(names, p.Name)
			}
			slices.Sort(names)
			if strings.Join(names, ",") != name+"-1,"+name+"-2" {
				t.Fatalf("%s lists %q, want only their two projects", name, names)
			}
		}
	}
	rename := func(p, name string) {
		t.Helper()
		jsonCall(t, http.DefaultClient, "PUT", c.url+"/v2/projects/"+projects[p], admin, map[string]any{"name": name}, 200, nil)
	}
	alice := streamLines(t, c.url+"/v2/notifications", users["alice"])
	bob := streamLines(t, c.url+"/v2/notifications", users["bob"])
	bobWS := streamFrames(t, c.url+"/v2/notifications/ws", users["bob"])
	aliceProject := streamLines(t, c.url+"/v2/projects/"+projects["alice-1"]+"/notifications", users["alice"])
	everything := streamLines(t, c.url+"/v2/notifications", admin)
	rename("alice-1", "a1")
	rename("bob-1", "b1")
	rename("alice-2", "a2")
	rename("bob-2", "b2")
	if got := readUntil(t, everything, "project.updated b2"); len(got) != 3 {
		t.Fatalf("the super admin's stream carried %q before b2, want the three others", got)
	}
	if got := readUntil(t, alice, "project.updated a2"); len(got) != 1 || got[0] != "project.updated a1" {
		t.Fatalf("alice's stream carried %q before a2, want only a1", got)
	}
	if got := readUntil(t, bob, "project.updated b2"); len(got) != 1 || got[0] != "project.updated b1" {
		t.Fatalf("bob's stream carried %q before b2, want only b1", got)
	}
	if got := readUntil(t, bobWS, "project.updated b2"); len(got) != 1 || got[0] != "project.updated b1" {
		t.Fatalf("bob's WebSocket carried %q before b2, want only b1", got)
	}

	// Alice loses alice-1: her open controller stream carries it no more,
	// and her stream of that project ends.
	jsonCall(t, http.DefaultClient, "DELETE", c.url+"/v3/access/acl/"+aces["alice-1"], admin, nil, 204, nil)
	rename("alice-1", "a3")
	rename("alice-2", "a4")
	if got := readUntil(t, alice, "project.updated a4"); len(got) != 0 {
		t.Fatalf("alice's stream carried %q after her ACE was removed", got)
	}
	timeout := time.After(20 * time.Second)
	for {
		select {
		case m, ok := <-aliceProject:
			if !ok {
				return
			}
			t.Logf("alice's project stream: %s", m)
		case <-timeout:
			t.Fatal("alice's project stream did not end after her ACE was removed")
		}
	}
}
