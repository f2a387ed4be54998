package main

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/labtap/labtap/internal/testenv"
)

// sharedLab is a controller with users: the super admin and alice, who
// holds the User role on one project with a started VPCS.
type sharedLab struct {
	c                 *controller
	admin, alice      string // Authorization headers
	project, aliceACE string
	node              nodeReply
}

func basicAuthHeader(user, pass string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
}

// jsonCall sends a JSON request with an Authorization header and decodes
// the reply into out, failing the test unless the status is want.
func jsonCall(t *testing.T, client *http.Client, method, url, auth string, body any, want int, out any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = strings.NewReader(string(b))
	}
	req, _ := http.NewRequest(method, url, rd)
	req.Header.Set("Authorization", auth)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s = %d %s, want %d", method, url, resp.StatusCode, data, want)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, url, err, data)
		}
	}
}

// roleID finds a built-in role's id by name.
func roleID(t *testing.T, c *controller, auth, name string) string {
	t.Helper()
	var roles []struct {
		RoleID string `json:"role_id"`
		Name   string `json:"name"`
	}
	jsonCall(t, http.DefaultClient, "GET", c.url+"/v3/access/roles", auth, nil, 200, &roles)
	for _, r := range roles {
		if r.Name == name {
			return r.RoleID
		}
	}
	t.Fatalf("no role %q in %v", name, roles)
	return ""
}

// newUser makes a user and returns its id.
func newUser(t *testing.T, c *controller, admin, name, pass string) string {
	t.Helper()
	var u struct {
		UserID string `json:"user_id"`
	}
	jsonCall(t, http.DefaultClient, "POST", c.url+"/v3/access/users", admin, map[string]any{"username": name, "password": pass}, 201, &u)
	return u.UserID
}

// grantRole gives a user a role on a path, and returns the ACE's id.
func grantRole(t *testing.T, c *controller, admin, userID, role, path string) string {
	t.Helper()
	var ace struct {
		ACEID string `json:"ace_id"`
	}
	jsonCall(t, http.DefaultClient, "POST", c.url+"/v3/access/acl", admin, map[string]any{
		"ace_type": "user", "path": path, "propagate": true, "allowed": true,
		"user_id": userID, "role_id": roleID(t, c, admin, role)}, 201, &ace)
	return ace.ACEID
}

func startSharedLab(t *testing.T, args ...string) *sharedLab {
	t.Helper()
	testenv.RequireTools(t, "vpcs")
	const adminPass, alicePass = "admin-pw-1234", "alice-pw-1234"
	l := &sharedLab{admin: basicAuthHeader("admin", adminPass), alice: basicAuthHeader("alice", alicePass)}
	l.c = startControllerWith(t, t.TempDir(), []string{"LABTAP_USER=admin", "LABTAP_PASSWORD=" + adminPass}, args...)
	aliceID := newUser(t, l.c, l.admin, "alice", alicePass)
	var p struct {
		ProjectID string `json:"project_id"`
	}
	jsonCall(t, http.DefaultClient, "POST", l.c.url+"/v2/projects", l.admin, map[string]any{"name": "alices-lab"}, 201, &p)
	l.project = p.ProjectID
	l.aliceACE = grantRole(t, l.c, l.admin, aliceID, "User", "/projects/"+l.project)
	base := l.c.url + "/v2/projects/" + l.project
	jsonCall(t, http.DefaultClient, "POST", base+"/nodes", l.admin, map[string]any{"name": "PC1", "node_type": "vpcs", "compute_id": "local"}, 201, &l.node)
	jsonCall(t, http.DefaultClient, "POST", base+"/nodes/"+l.node.NodeID+"/start", l.admin, nil, 200, &l.node)
	return l
}

// telnetFrom connects to a node's console port from a loopback address.
func telnetFrom(t *testing.T, from string, n nodeReply) (net.Conn, *bufio.Reader) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	conn, err := d.Dial("tcp", net.JoinHostPort(n.ConsoleHost, fmt.Sprint(n.Console)))
	if err != nil {
		t.Fatalf("console from %s: %v", from, err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn, bufio.NewReader(conn)
}

// refused reports whether a console connection is closed with labtap's
// refusal, before anything of the node's.
func refused(t *testing.T, conn net.Conn, r *bufio.Reader) bool {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	all, _ := io.ReadAll(r)
	return strings.HasPrefix(string(all), "labtap: this console is not open to")
}

// vpcsAnswers types a command on an open console and waits for VPCS's
// answer.
func vpcsAnswers(t *testing.T, conn net.Conn, r *bufio.Reader) {
	t.Helper()
	vpcsNamed(t, conn, r, "PC1")
}

// vpcsNamed is vpcsAnswers for a VPCS of another name.
func vpcsNamed(t *testing.T, conn net.Conn, r *bufio.Reader, name string) {
	t.Helper()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	var got strings.Builder
	buf := make([]byte, 4096)
	for !strings.Contains(got.String(), "NAME        : "+name+"[") {
		if _, err := conn.Write([]byte("show ip\r\n")); err != nil {
			t.Fatalf("console write: %v (read %q)", err, got.String())
		}
		n, err := r.Read(buf)
		got.Write(buf[:n])
		if err != nil {
			t.Fatalf("console read: %v (read %q)", err, got.String())
		}
	}
	conn.SetDeadline(time.Time{})
}

// TestConsolePortsLetInOnlyAddressesGrantedByAnAllowedRead runs a
// controller with users and a real VPCS: its console port refuses every
// address until a user allowed Node.Console reads the node's project from
// that address; then that address gets the console and no other does;
// a user who may read the project but not open consoles (Auditor) grants
// nothing; and once the user's ACE is removed, its open connection is
// cut off.
func TestConsolePortsLetInOnlyAddressesGrantedByAnAllowedRead(t *testing.T) {
	l := startSharedLab(t)
	if conn, r := telnetFrom(t, "127.0.0.2", l.node); !refused(t, conn, r) {
		t.Fatal("the console let in an address before any read")
	}
	// Alice opens her project from 127.0.0.2, as the GUI does.
	jsonCall(t, clientFromAddr("127.0.0.2"), "GET", l.c.url+"/v2/projects/"+l.project+"/nodes", l.alice, nil, 200, nil)
	conn, r := telnetFrom(t, "127.0.0.2", l.node)
	vpcsAnswers(t, conn, r)
	// Bob may read the project (Auditor) but not open its consoles: his
	// read from 127.0.0.3 grants nothing.
	bobID := newUser(t, l.c, l.admin, "bob", "bob-pw-1234")
	grantRole(t, l.c, l.admin, bobID, "Auditor", "/projects/"+l.project)
	jsonCall(t, clientFromAddr("127.0.0.3"), "GET", l.c.url+"/v2/projects/"+l.project, basicAuthHeader("bob", "bob-pw-1234"), nil, 200, nil)
	if c3, r3 := telnetFrom(t, "127.0.0.3", l.node); !refused(t, c3, r3) {
		t.Fatal("an address only an Auditor read from got the console")
	}

	// A node she makes and starts from 127.0.0.4 is hers there at once (a
	// GUI does not read a node it made).
	var pc2 nodeReply
	from4 := clientFromAddr("127.0.0.4")
	base := l.c.url + "/v2/projects/" + l.project + "/nodes"
	jsonCall(t, from4, "POST", base, l.alice, map[string]any{"name": "PC2", "node_type": "vpcs", "compute_id": "local"}, 201, &pc2)
	jsonCall(t, from4, "POST", base+"/"+pc2.NodeID+"/start", l.alice, nil, 200, &pc2)
	c4, r4 := telnetFrom(t, "127.0.0.4", pc2)
	vpcsNamed(t, c4, r4, "PC2")

	// Her access removed: the open connection is cut off, a new one refused.
	jsonCall(t, http.DefaultClient, "DELETE", l.c.url+"/v3/access/acl/"+l.aliceACE, l.admin, nil, 204, nil)
	conn.SetReadDeadline(time.Now().Add(15 * time.Second))
	if _, err := io.Copy(io.Discard, r); err != nil {
		t.Fatalf("the revoked connection was not closed: %v", err)
	}
	if c2, r2 := telnetFrom(t, "127.0.0.2", l.node); !refused(t, c2, r2) {
		t.Fatal("a revoked address got the console again")
	}
}

// TestConsolePortsStayOpenWithConsoleOpen: --console-open keeps today's
// open ports, users or not.
func TestConsolePortsStayOpenWithConsoleOpen(t *testing.T) {
	l := startSharedLab(t, "--console-open")
	conn, r := telnetFrom(t, "127.0.0.3", l.node)
	vpcsAnswers(t, conn, r)
}
