// Package docker holds labtap's Dockerfiles and compose file, and the tests
// that keep them correct: they are parsed and checked everywhere, and, where
// a Docker Engine runs (LABTAP_DOCKER=1, which scripts/test sets when it
// finds one), built from the local Debian base image and run as a lab.
package docker

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
	"github.com/labtap/labtap/agent/node"
	"github.com/labtap/labtap/internal/testenv"
	"gopkg.in/yaml.v3"
)

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	cmd, args string
}

func parseDockerfile(t *testing.T, path string) []instruction {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []instruction
	var cur strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if cur.Len() == 0 && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if strings.HasPrefix(line, "#") { // a comment inside a continued instruction
			continue
		}
		if l, ok := strings.CutSuffix(line, "\\"); ok {
			cur.WriteString(l + " ")
			continue
		}
		cur.WriteString(line)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		out = append(out, instruction{strings.ToUpper(cmd), strings.TrimSpace(args)})
		cur.Reset()
	}
	if cur.Len() > 0 {
		t.Fatalf("%s ends inside a continued instruction", path)
	}
	return out
}

var known = []string{"FROM", "RUN", "COPY", "ENV", "USER", "EXPOSE", "ENTRYPOINT", "CMD", "WORKDIR", "LABEL", "ARG", "VOLUME", "HEALTHCHECK"}

func TestDockerfilesBuildFromTheLocalBaseAsAUserAndRunTheirBinary(t *testing.T) {
	ignore, err := os.ReadFile("../.dockerignore")
	if err != nil {
		t.Fatalf("the build context needs a .dockerignore (it copies only bin/): %v", err)
	}
	for _, tc := range []struct {
		file, binary string
		packages     []string
		port         string
	}{
		{"agent.Dockerfile", "agent", []string{"vpcs", "libpcap0.8"}, "3081"},
		{"controller.Dockerfile", "controller", []string{"vpcs", "libpcap0.8"}, "3080"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			ins := parseDockerfile(t, tc.file)
			if len(ins) == 0 || ins[0].cmd != "FROM" || ins[0].args != "debian:bookworm-slim" {
				t.Fatalf("first instruction %+v: want FROM debian:bookworm-slim (scripts/debian-image builds it; nothing can be pulled)", ins[0])
			}
			var user, entry, env, run, expose string
			for _, in := range ins {
				if !slices.Contains(known, in.cmd) {
					t.Errorf("unknown instruction %s", in.cmd)
				}
				switch in.cmd {
				case "USER":
					user = in.args
				case "ENTRYPOINT":
					entry = in.args
				case "ENV":
					env += in.args + " "
				case "RUN":
					run += in.args + " "
				case "EXPOSE":
					expose = in.args
				case "COPY":
					src := strings.Fields(in.args)[0]
					if src != "bin/"+tc.binary {
						t.Errorf("COPY %s: the image holds its binary only", in.args)
					}
					if !bytes.Contains(ignore, []byte("!"+src)) {
						t.Errorf(".dockerignore leaves %s out of the build context", src)
					}
				}
			}
			if user == "" || user == "root" || user == "0" {
				t.Errorf("runs as %q: want a system user", user)
			}
			var argv []string
			if err := json.Unmarshal([]byte(entry), &argv); err != nil || len(argv) != 1 || argv[0] != "/usr/local/bin/"+tc.binary {
				t.Errorf("ENTRYPOINT %s: want the exec form running /usr/local/bin/%s", entry, tc.binary)
			}
			for _, p := range tc.packages {
				if !regexp.MustCompile(`apt-get install [^&]*\b` + regexp.QuoteMeta(p) + `\b`).MatchString(run) {
					t.Errorf("does not install %s", p)
				}
			}
			if !strings.Contains(run, "rm -rf /var/lib/apt/lists/*") {
				t.Error("keeps the apt lists in the image")
			}
			if !strings.Contains(env, "LABTAP_LISTEN=0.0.0.0:"+tc.port) || expose != tc.port {
				t.Errorf("listens on %q, exposes %q: want 0.0.0.0:%s, both", env, expose, tc.port)
			}
			if !strings.Contains(env, "LABTAP_DATA_DIR=/var/lib/labtap") {
				t.Error("keeps its data outside /var/lib/labtap, the user's home and the compose volume")
			}
		})
	}
}

type composeFile struct {
	Services map[string]struct {
		Build *struct {
			Context    string `yaml:"context"`
			Dockerfile string `yaml:"dockerfile"`
		} `yaml:"build"`
		Image       string            `yaml:"image"`
		Hostname    string            `yaml:"hostname"`
		User        string            `yaml:"user"`
		Environment map[string]string `yaml:"environment"`
		Ports       []string          `yaml:"ports"`
		Volumes     []string          `yaml:"volumes"`
		DependsOn   dependsOn         `yaml:"depends_on"`
		Entrypoint  []string          `yaml:"entrypoint"`
		Restart     string            `yaml:"restart"`
	} `yaml:"services"`
}

// dependsOn is a service's depends_on, in either of its forms: a list of
// services (each started), or a map of service to its condition.
type dependsOn map[string]string

func (d *dependsOn) UnmarshalYAML(n *yaml.Node) error {
	*d = dependsOn{}
	var list []string
	if n.Decode(&list) == nil {
		for _, s := range list {
			(*d)[s] = "service_started"
		}
		return nil
	}
	var m map[string]struct {
		Condition string `yaml:"condition"`
	}
	if err := n.Decode(&m); err != nil {
		return err
	}
	for s, c := range m {
		(*d)[s] = c.Condition
	}
	return nil
}

func TestComposeStartsAControllerAndTwoAgentsJoinedToIt(t *testing.T) {
	data, err := os.ReadFile("compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cf composeFile
	if err := yaml.Unmarshal(data, &cf); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	ctl, ok := cf.Services["controller"]
	if !ok || ctl.Build == nil || ctl.Build.Dockerfile != "docker/controller.Dockerfile" || ctl.Build.Context != ".." {
		t.Fatalf("controller service %+v", ctl)
	}
	if bytes.Contains(data, []byte("LABTAP_SECRET")) {
		t.Error("compose.yaml still uses the deprecated shared secret: agents join instead")
	}
	if ctl.Environment["LABTAP_TLS"] != "auto" || ctl.Environment["LABTAP_USER"] != "admin" ||
		!strings.HasPrefix(ctl.Environment["LABTAP_PASSWORD"], "${LABTAP_PASSWORD:?") {
		t.Errorf("the controller must serve HTTPS with its own CA (agents join it) and refuse to start without an admin password: %v", ctl.Environment)
	}
	for _, p := range ctl.Ports {
		if !strings.HasPrefix(p, "127.0.0.1:") {
			t.Errorf("the controller's API is published beyond loopback: %s", p)
		}
	}
	// enroll: trusts the CA of the certificate file in the controller's
	// volume (read-only), never what the controller says over a connection
	// not yet trusted, and asks for tokens as the admin.
	enroll, ok := cf.Services["enroll"]
	if !ok {
		t.Fatal("no enroll service")
	}
	enrollScript := strings.ReplaceAll(strings.Join(enroll.Entrypoint, " "), "$$", "$") // a shell's $, as compose passes it
	if !slices.Contains(enroll.Volumes, "controller-data:/controller:ro") || enroll.Restart != "no" ||
		enroll.DependsOn["controller"] == "" || enroll.Image != "labtap-agent" {
		t.Errorf("enroll %+v", enroll)
	}
	for _, want := range []string{"openssl x509 -in $ca -noout -fingerprint -sha256", "--cacert $ca", `-u "admin:$LABTAP_PASSWORD"`,
		"https://controller:3080/v3/computes/join-tokens", "tls/agent.crt"} {
		if !strings.Contains(enrollScript, want) {
			t.Errorf("enroll's script lacks %q:\n%s", want, enrollScript)
		}
	}
	for _, bad := range []string{" -k ", "--insecure", "ca_sha256\""} {
		if strings.Contains(enrollScript, bad) {
			t.Errorf("enroll's script trusts what it has not checked (%q):\n%s", bad, enrollScript)
		}
	}
	if !strings.HasPrefix(enroll.Environment["LABTAP_PASSWORD"], "${LABTAP_PASSWORD:?") {
		t.Errorf("enroll: LABTAP_PASSWORD=%q", enroll.Environment["LABTAP_PASSWORD"])
	}
	ids := map[string]bool{}
	for _, name := range []string{"agent1", "agent2"} {
		a, ok := cf.Services[name]
		if !ok {
			t.Fatalf("no %s service", name)
		}
		env := a.Environment
		if a.Build == nil || a.Build.Dockerfile != "docker/agent.Dockerfile" {
			t.Errorf("%s builds from %+v", name, a.Build)
		}
		if _, ok := env["LABTAP_CONTROLLER"]; ok {
			t.Errorf("%s registers itself (LABTAP_CONTROLLER) instead of joining: %v", name, env)
		}
		script := strings.Join(a.Entrypoint, " ")
		if !strings.Contains(script, "LABTAP_JOIN=https://controller:3080") || !strings.Contains(script, "exec /usr/local/bin/agent") ||
			!strings.Contains(script, "join/token") || !strings.Contains(script, "join/ca_sha256") {
			t.Errorf("%s does not join the controller with the token and fingerprint enroll leaves it: %q", name, script)
		}
		if env["LABTAP_ADVERTISE"] != a.Hostname || a.Hostname == "" {
			t.Errorf("%s advertises %q but is named %q: the controller and the other agent could not reach it", name, env["LABTAP_ADVERTISE"], a.Hostname)
		}
		if ids[env["LABTAP_COMPUTE_ID"]] || env["LABTAP_COMPUTE_ID"] == "" {
			t.Errorf("%s compute id %q is empty or taken", name, env["LABTAP_COMPUTE_ID"])
		}
		ids[env["LABTAP_COMPUTE_ID"]] = true
		if a.DependsOn["enroll"] != "service_completed_successfully" || len(a.Volumes) != 1 ||
			!slices.Contains(enroll.Volumes, strings.Split(a.Volumes[0], ":")[0]+":/agents/"+name) {
			t.Errorf("%s: depends on %v, volumes %v: it must start once enroll has left its token in its volume", name, a.DependsOn, a.Volumes)
		}
		for _, v := range a.Volumes {
			if strings.HasPrefix(v, "controller-data:") {
				t.Errorf("%s mounts the controller's volume (its CA key): %s", name, v)
			}
		}
	}
	// Node consoles are reachable from the host: each service publishes,
	// on loopback only, the range its consoles take their ports from, and
	// reports 127.0.0.1 as their host; no two services share a port.
	taken := map[int]string{}
	for _, name := range []string{"controller", "agent1", "agent2"} {
		sv := cf.Services[name]
		ref := sv.Environment["LABTAP_CONSOLE_PORTS"] // ${VAR:-LO-HI}
		m := regexp.MustCompile(`^\$\{[A-Z0-9_]+:-(\d+-\d+)\}$`).FindStringSubmatch(ref)
		if sv.Environment["LABTAP_CONSOLE_HOST"] != "127.0.0.1" || m == nil {
			t.Errorf("%s: consoles reported at %q, ports %q", name, sv.Environment["LABTAP_CONSOLE_HOST"], ref)
			continue
		}
		rng := m[1]
		if !slices.Contains(sv.Ports, "127.0.0.1:"+ref+":"+ref) {
			t.Errorf("%s publishes %v, not its console ports %s on loopback", name, sv.Ports, ref)
		}
		lo, hi, _ := strings.Cut(rng, "-")
		a, _ := strconv.Atoi(lo)
		b, _ := strconv.Atoi(hi)
		for p := a; p <= b; p++ {
			if other, dup := taken[p]; dup || b-a > 1000 {
				t.Fatalf("console port %d of %s is also %s's", p, name, other)
			}
			taken[p] = name
		}
	}
	// Docker's own reading of it, where the tool is installed.
	testenv.Long(t, "docker-compose's own reading of the file takes seconds")
	compose, err := exec.LookPath("docker-compose")
	if err != nil {
		// scripts/test installs it where a Docker Engine answers.
		testenv.SkipOrFail(t, "LABTAP_DOCKER", "docker-compose is not installed: only parsed")
	}
	cmd := exec.Command(compose, "-f", "compose.yaml", "config", "-q")
	cmd.Env = append(os.Environ(), "LABTAP_PASSWORD=x")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("docker-compose config: %v\n%s", err, out)
	}
	cmd = exec.Command(compose, "-f", "compose.yaml", "config", "-q")
	cmd.Env = slices.DeleteFunc(os.Environ(), func(e string) bool { return strings.HasPrefix(e, "LABTAP_PASSWORD=") })
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Fatalf("docker-compose accepts the file without LABTAP_PASSWORD:\n%s", out)
	}
	// The documented way: the password in an env file, which every later
	// command (down included) reads without the variable being set again.
	envFile := filepath.Join(t.TempDir(), "labtap.env")
	os.WriteFile(envFile, []byte("LABTAP_PASSWORD=0123456789abcdef\n"), 0o600)
	cmd = exec.Command(compose, "--env-file", envFile, "-f", "compose.yaml", "config")
	cmd.Env = slices.DeleteFunc(os.Environ(), func(e string) bool { return strings.HasPrefix(e, "LABTAP_PASSWORD=") })
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "0123456789abcdef") {
		t.Fatalf("docker-compose --env-file: %v\n%s", err, out)
	}
}

// lab is a compose project started by a test.
type lab struct {
	t       *testing.T
	name    string
	compose string
	env     []string
}

func (l *lab) run(args ...string) string {
	l.t.Helper()
	cmd := exec.Command(l.compose, append([]string{"-p", l.name, "-f", "compose.yaml"}, args...)...)
	cmd.Env = append(os.Environ(), l.env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		l.t.Fatalf("docker-compose %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// ip returns a service's address on the compose network, which the host
// reaches directly.
func (l *lab) ip(service string) string {
	l.t.Helper()
	id := strings.TrimSpace(l.run("ps", "-q", service))
	out, err := exec.Command("docker", "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", id).Output()
	if err != nil || net.ParseIP(strings.TrimSpace(string(out))) == nil {
		l.t.Fatalf("address of %s: %v %q", service, err, out)
	}
	return strings.TrimSpace(string(out))
}

// admin is an HTTP client of the controller's API as its admin, over HTTPS
// trusting the controller's CA only.
type admin struct {
	password string
	tr       *http.Transport
}

func (a admin) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.SetBasicAuth("admin", a.password)
	return a.tr.RoundTrip(req)
}

func call(t *testing.T, c *http.Client, method, url string, body any, want int, out any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, url, rd)
	resp, err := c.Do(req)
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
			t.Fatalf("%s %s: %v", method, url, err)
		}
	}
}

func TestComposeLabPingsAndCapturesAcrossContainers(t *testing.T) {
	if os.Getenv("LABTAP_DOCKER") != "1" {
		t.Skip("set LABTAP_DOCKER=1 where a Docker Engine runs (scripts/test does) to build and run the images")
	}
	compose, err := exec.LookPath("docker-compose")
	if err != nil {
		t.Fatal("LABTAP_DOCKER=1 but docker-compose is not installed")
	}
	if out, err := exec.Command("../scripts/debian-image").CombinedOutput(); err != nil {
		t.Fatalf("scripts/debian-image: %v\n%s", err, out)
	}
	if out, err := exec.Command("go", "build", "-o", "../bin/", "../controller", "../agent").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	suffix := make([]byte, 4)
	rand.Read(suffix)
	// The API port and the three console ranges above it, all free and
	// out of the ephemeral range: a port free when chosen but taken by
	// another process's connection before Docker bound it failed "up".
	port := testenv.UnusedTCPPorts(t, 31)
	password := hex.EncodeToString(suffix) + "-password"
	l := &lab{t: t, name: "labtaptest" + hex.EncodeToString(suffix), compose: compose,
		env: []string{"LABTAP_PASSWORD=" + password, fmt.Sprintf("LABTAP_PORT=%d", port),
			// Console ranges of this run only: another lab may hold the defaults.
			fmt.Sprintf("LABTAP_CONTROLLER_CONSOLES=%d-%d", port+1, port+10),
			fmt.Sprintf("LABTAP_AGENT1_CONSOLES=%d-%d", port+11, port+20),
			fmt.Sprintf("LABTAP_AGENT2_CONSOLES=%d-%d", port+21, port+30)}}
	t.Cleanup(func() {
		if t.Failed() {
			cmd := exec.Command(compose, "-p", l.name, "-f", "compose.yaml", "logs", "--no-color", "--tail", "60")
			cmd.Env = append(os.Environ(), l.env...)
			out, _ := cmd.CombinedOutput()
			t.Logf("compose logs:\n%s", out)
		}
		cmd := exec.Command(compose, "-p", l.name, "-f", "compose.yaml", "down", "-v", "-t", "5")
		cmd.Env = append(os.Environ(), l.env...)
		cmd.Run()
	})
	// up returns once enroll has left the tokens and the agents started.
	l.run("up", "-d", "--build")
	api := fmt.Sprintf("https://127.0.0.1:%d/v2", port)

	// The API is HTTPS only, under the CA of the controller's volume.
	caPEM := l.run("exec", "-T", "controller", "cat", "/var/lib/labtap/tls/ca.crt")
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM([]byte(caPEM)) {
		t.Fatalf("the controller's ca.crt:\n%s", caPEM)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: admin{password, tr}}
	if resp, err := http.Get("http" + strings.TrimPrefix(api, "https") + "/version"); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("plain HTTP to the controller: %d, want it refused", resp.StatusCode)
		}
	}
	if resp, err := (&http.Client{Transport: tr}).Get(api + "/computes"); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the API without the admin's credentials: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}

	// Both agents join and the controller calls them over mutual TLS.
	waitJoined := func() {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			var computes []struct {
				ComputeID string `json:"compute_id"`
				Protocol  string `json:"protocol"`
				Connected bool   `json:"connected"`
			}
			if resp, err := client.Get(api + "/computes"); err == nil {
				json.NewDecoder(resp.Body).Decode(&computes)
				resp.Body.Close()
			}
			connected := 0
			for _, c := range computes {
				if (c.ComputeID == "agent1" || c.ComputeID == "agent2") && c.Connected && c.Protocol == "https" {
					connected++
				}
			}
			if connected == 2 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("agents not joined and connected over https after 60 s: %+v", computes)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	waitJoined()
	// An agent takes no call but the controller's: plain HTTP is refused,
	// and so is TLS without the controller's client certificate.
	agent1 := net.JoinHostPort(l.ip("agent1"), "3081")
	if resp, err := http.Get("http://" + agent1 + "/v2/compute/version"); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("plain HTTP to agent1: %d, want it refused", resp.StatusCode)
		}
	}
	anon := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: "agent1"}}
	defer anon.CloseIdleConnections()
	if resp, err := (&http.Client{Transport: anon}).Get("https://" + agent1 + "/v2/compute/version"); err == nil {
		resp.Body.Close()
		t.Fatalf("agent1 answered a client without the controller's certificate: %d", resp.StatusCode)
	}
	// Joined agents restart from their certificate: enroll, run again,
	// makes them no new token, and they connect again.
	l.run("up", "-d")
	if logs := l.run("logs", "--no-color", "enroll"); !strings.Contains(logs, "agent1 has joined: no token") || !strings.Contains(logs, "agent2 has joined: no token") {
		t.Fatalf("enroll run again on joined agents:\n%s", logs)
	}
	for _, a := range []string{"agent1", "agent2"} {
		// What enroll left is the agent user's alone, the spent token gone.
		out := l.run("exec", "-T", a, "sh", "-c", "stat -c '%a %U' /var/lib/labtap/join/ca_sha256; test -e /var/lib/labtap/join/token || echo spent")
		if out != "600 labtap\nspent\n" {
			t.Errorf("%s's join/: %q, want its fingerprint 0600 and its user's, the spent token deleted", a, out)
		}
	}
	l.run("restart", "-t", "5", "agent1", "agent2")
	waitJoined()

	var project struct {
		ProjectID string `json:"project_id"`
	}
	call(t, client, "POST", api+"/projects", map[string]any{"name": "compose"}, 201, &project)
	base := api + "/projects/" + project.ProjectID
	type nodeReply struct {
		NodeID      string `json:"node_id"`
		Console     int    `json:"console"`
		ConsoleHost string `json:"console_host"`
		Status      string `json:"status"`
	}
	nodes := make([]nodeReply, 2)
	for i := range nodes {
		call(t, client, "POST", base+"/nodes", map[string]any{"name": fmt.Sprint("PC", i+1), "node_type": "vpcs", "compute_id": fmt.Sprint("agent", i+1)}, 201, &nodes[i])
	}
	var link struct {
		LinkID           string  `json:"link_id"`
		Capturing        bool    `json:"capturing"`
		CaptureComputeID *string `json:"capture_compute_id"`
	}
	call(t, client, "POST", base+"/links", map[string]any{"nodes": []map[string]any{
		{"node_id": nodes[0].NodeID, "adapter_number": 0, "port_number": 0},
		{"node_id": nodes[1].NodeID, "adapter_number": 0, "port_number": 0},
	}}, 201, &link)
	cons := make([]*node.Console, 2)
	for i := range nodes {
		call(t, client, "POST", base+"/nodes/"+nodes[i].NodeID+"/start", nil, 200, &nodes[i])
		// Consoles are reported where this host reaches them, as a GUI here
		// would open them: loopback, on the ports the agents publish.
		if nodes[i].ConsoleHost != "127.0.0.1" {
			t.Fatalf("PC%d's console is reported at %q", i+1, nodes[i].ConsoleHost)
		}
		con, err := node.DialConsole(t.Context(), net.JoinHostPort(nodes[i].ConsoleHost, fmt.Sprint(nodes[i].Console)))
		if err != nil {
			t.Fatal(err)
		}
		defer con.Close()
		cons[i] = con
	}
	try := func(con *node.Console, cmd string) (string, error) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		out, err := con.Run(ctx, cmd)
		if err != nil {
			return out, fmt.Errorf("%s: %v %q", cmd, err, out)
		}
		return out, nil
	}
	run := func(con *node.Console, cmd string) string {
		out, err := try(con, cmd)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	// Both at once (VPCS checks for a duplicate address for about 3 s);
	// the failure is reported from the test's goroutine.
	done := make(chan error, 1)
	go func() { _, err := try(cons[1], "ip 10.0.0.2/24"); done <- err }()
	run(cons[0], "ip 10.0.0.1/24")
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	linkURL := base + "/links/" + link.LinkID
	call(t, client, "POST", linkURL+"/start_capture", map[string]any{}, 201, &link)
	if !link.Capturing || link.CaptureComputeID == nil || *link.CaptureComputeID != "agent1" {
		t.Fatalf("start_capture: %+v", link)
	}
	// Streamed through the controller from agent1's container.
	resp, err := client.Get(linkURL + "/pcap")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	streamed := make(chan []byte, 1)
	go func() { b, _ := io.ReadAll(resp.Body); streamed <- b }()
	replies := len(regexp.MustCompile(`icmp_seq=\d+ ttl=\d+ time=`).FindAllString(run(cons[0], "ping 10.0.0.2 -c 3"), -1))
	if replies < 2 {
		t.Fatalf("%d of 3 pings across the containers answered", replies)
	}
	call(t, client, "POST", linkURL+"/stop_capture", nil, 201, nil)
	var body []byte
	select {
	case body = <-streamed:
	case <-time.After(20 * time.Second):
		t.Fatal("the stream did not end after the capture stopped")
	}
	r, err := pcapgo.NewReader(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("streamed capture: %v", err)
	}
	icmp := 0
	for {
		data, _, err := r.ReadPacketData()
		if err != nil {
			break
		}
		if gopacket.NewPacket(data, layers.LinkTypeEthernet, gopacket.Default).Layer(layers.LayerTypeICMPv4) != nil {
			icmp++
		}
	}
	if icmp < 2*replies {
		t.Fatalf("the streamed capture holds %d ICMP frames for %d answered pings", icmp, replies)
	}
	if testenv.HaveTool(t, "tshark") {
		f := filepath.Join(t.TempDir(), "streamed.pcap")
		if err := os.WriteFile(f, body, 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("tshark", "-r", f).CombinedOutput(); err != nil {
			t.Fatalf("tshark on the streamed capture: %v\n%s", err, out)
		}
	}
}
