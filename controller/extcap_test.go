package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/gopacket/pcapgo"
	"github.com/labtap/labtap/agent/node"
	"github.com/labtap/labtap/internal/testenv"
)

// wiresharkHome makes a home directory whose Wireshark finds
// labtap-extcap in its personal extcap folder (~/.config/wireshark/extcap
// for Wireshark 4.0 and older, ~/.local/lib/wireshark/extcap from 4.1:
// both get it) and whose ~/.config/labtap/extcap.json names the server.
// It returns the environment of a tshark that uses them.
func wiresharkHome(t testing.TB, servers any) []string {
	t.Helper()
	bin := built(t, "labtap-extcap", "../extcap")
	home := t.TempDir()
	cfg := filepath.Join(home, ".config")
	for _, dir := range []string{filepath.Join(cfg, "wireshark", "extcap"), filepath.Join(home, ".local", "lib", "wireshark", "extcap")} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(bin, filepath.Join(dir, "labtap-extcap")); err != nil {
			t.Fatal(err)
		}
	}
	data, _ := json.Marshal(map[string]any{"servers": servers})
	if err := os.MkdirAll(filepath.Join(cfg, "labtap"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfg, "labtap", "extcap.json"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); !strings.HasPrefix(k, "LABTAP_") && k != "HOME" && k != "XDG_CONFIG_HOME" {
			env = append(env, kv)
		}
	}
	return append(env, "HOME="+home, "XDG_CONFIG_HOME="+cfg)
}

// waitExtcapsGone waits until no labtap-extcap of the home in env runs
// (its program's path is the home's own).
func waitExtcapsGone(t *testing.T, env []string) {
	t.Helper()
	var home string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "HOME="); ok {
			home = v
		}
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
		running := false
		for _, f := range cmdlines {
			if data, err := os.ReadFile(f); err == nil && strings.HasPrefix(string(data), home+"/") {
				running = true
			}
		}
		if !running {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("labtap-extcap still runs 30 s after tshark ended")
		}
	}
}

// tsharkIn runs tshark with env and returns its output, stdout and stderr
// together, and its error.
func tsharkIn(ctx context.Context, env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "tshark", args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// extcapPref is the name of Wireshark's preference holding an extcap
// option of an interface: extcap.<interface, lower case, every character
// but letters, digits and _ as _>.<option without dashes>.
func extcapPref(iface, option string) string {
	key := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' {
			return r
		}
		return '_'
	}, iface)
	return "extcap." + strings.ToLower(key) + "." + option
}

// waitLink polls a link until ok says its capture is as wanted.
func (c *controller) waitLink(path string, what string, ok func(linkJSON) bool) linkJSON {
	c.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var l linkJSON
		c.call("GET", path, nil, 200, &l)
		if ok(l) {
			return l
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("link %s: not %s after 20 s: %+v", path, what, l)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// linkJSON is what the extcap tests read of a link.
type linkJSON struct {
	Capturing bool `json:"capturing"`
	Capture   *struct {
		Spec struct {
			Filter string `json:"capture_filter"`
		} `json:"spec"`
	} `json:"capture"`
}

func TestWiresharkListsTheLinksAndCapturesAVPCSPingThroughTheExtcap(t *testing.T) {
	testenv.RequireTools(t, "vpcs", "tshark", "dumpcap")
	const user, password = "admin", "extcap-secret"
	c := startControllerWith(t, t.TempDir(), nil, "--user", user, "--password", password)
	c.user, c.password = user, password
	lab := c.twoPCs("wireshark lab", "local", "local", "10.0.0.1", "10.0.0.2")
	for _, p := range lab.pcs {
		c.call("POST", lab.base+"/nodes/"+p.node.NodeID+"/start", nil, 200, &p.node)
		con, err := node.DialConsole(t.Context(), net.JoinHostPort(p.node.ConsoleHost, fmt.Sprint(p.node.Console)))
		if err != nil {
			t.Fatal(err)
		}
		defer con.Close()
		p.con = con
	}
	setAddresses(t, lab.pcs)
	env := wiresharkHome(t, []map[string]string{{"url": c.url, "user": user, "password": password}})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	// tshark -D lists the link, named after its ends, and the project.
	linkIface := "labtap_" + lab.projectID + "_" + lab.link.LinkID
	projectIface := "labtap_" + lab.projectID + "_all"
	out, err := tsharkIn(ctx, env, "-D")
	if err != nil {
		t.Fatalf("tshark -D: %v\n%s", err, out)
	}
	for _, want := range []string{
		linkIface + " (labtap: PC1 Ethernet0 ↔ PC2 Ethernet0 (wireshark lab))",
		projectIface + " (labtap: wireshark lab (whole project))",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("tshark -D does not list %q:\n%s", want, out)
		}
	}

	// A capture of the link in tshark, with a capture filter: the extcap
	// starts the link's capture with it, streams it, and stops it after.
	linkPath := lab.base + "/links/" + lab.link.LinkID
	for _, iface := range []string{linkIface, projectIface} {
		file := filepath.Join(t.TempDir(), "wireshark.pcapng")
		done := make(chan string, 1)
		go func() {
			out, err := tsharkIn(ctx, env, "-i", iface, "-f", "icmp", "-c", "4", "-a", "duration:60", "-w", file)
			done <- fmt.Sprintf("%s (exit: %v)", out, err)
		}()
		c.waitLink(linkPath, "capturing icmp", func(l linkJSON) bool {
			return l.Capturing && l.Capture != nil && l.Capture.Spec.Filter == "icmp"
		})
		lab.pcs[0].ping(t, "10.0.0.2", 3)
		select {
		case out := <-done:
			if !strings.Contains(out, "4 packets captured") {
				t.Fatalf("tshark -i %s: %s", iface, out)
			}
		case <-ctx.Done():
			t.Fatalf("tshark -i %s did not end with 4 packets", iface)
		}
		if n := tsharkCount(t, file, "icmp.type == 0 && ip.src == 10.0.0.2"); n != 2 {
			t.Errorf("%s: %d ping replies in Wireshark's file, want 2", iface, n)
		}
		c.waitLink(linkPath, "stopped", func(l linkJSON) bool { return !l.Capturing })
	}

	// A capture that ran already is streamed as it is, from its first
	// frame, and goes on after.
	c.call("POST", linkPath+"/start_capture", map[string]any{}, 201, nil)
	lab.pcs[0].ping(t, "10.0.0.2", 1)
	out, err = tsharkIn(ctx, env, "-i", linkIface, "-c", "2", "-a", "duration:60", "-w", filepath.Join(t.TempDir(), "running.pcap"))
	if err != nil || !strings.Contains(out, "2 packets captured") {
		t.Fatalf("tshark on a running capture: %v\n%s", err, out)
	}
	waitExtcapsGone(t, env)
	c.waitLink(linkPath, "still capturing", func(l linkJSON) bool { return l.Capturing })
	c.call("POST", linkPath+"/stop_capture", nil, 201, nil)

	// A wrong password, as Wireshark's dialog stores it for the interface:
	// the capture fails with the server's refusal in Wireshark's error.
	out, err = tsharkIn(ctx, env, "-o", extcapPref(linkIface, "user")+":"+user, "-o", extcapPref(linkIface, "password")+":wrong",
		"-i", linkIface, "-a", "duration:3", "-w", filepath.Join(t.TempDir(), "refused.pcap"))
	if err == nil || !strings.Contains(out, `refused the login (401): user "admin" or its password is wrong`) {
		t.Errorf("tshark with a wrong password: %v, want a failure saying so:\n%s", err, out)
	}
	// A wrong password in the configuration: Wireshark's list says so.
	out, err = tsharkIn(ctx, append(env, "LABTAP_URL="+c.url, "LABTAP_USER="+user, "LABTAP_PASSWORD=wrong"), "-D")
	if want := "labtap_server0_unlisted (labtap: " + c.url + ": wrong user or password (401)"; err != nil || !strings.Contains(out, want) {
		t.Errorf("tshark -D with a wrong password: %v, want %q in:\n%s", err, want, out)
	}
	var l linkJSON
	if c.call("GET", linkPath, nil, 200, &l); l.Capturing {
		t.Error("a refused extcap left the link capturing")
	}
}

func TestOpenInWiresharkFromTheBrowserStartsWiresharkOnTheLinkThroughTheURLHandler(t *testing.T) {
	testenv.RequireTools(t, "chromium", "tshark")
	c := startController(t)
	lab := c.twoPCs("one click", "local", "local", "10.0.0.1", "10.0.0.2")
	linkPath := lab.base + "/links/" + lab.link.LinkID
	env := wiresharkHome(t, []any{})

	// The page's links, as the browser made them.
	ctx := browser(t)
	if err := chromedp.Run(ctx, chromedp.Navigate(c.url+linkPath+"/view")); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, `document.querySelector("#wireshark").href.startsWith("labtap:") && document.querySelectorAll("#tree a.ws").length === 2`)
	button := evalJS[string](t, ctx, `document.querySelector("#wireshark").href`)
	tree := evalJS[[]string](t, ctx, `[...document.querySelectorAll("#tree a.ws")].map(a => a.href)`)
	host := strings.TrimPrefix(c.url, "http://")
	gns3 := "gns3+pcap://" + host + "?project_id=" + lab.projectID + "&link_id=" + lab.link.LinkID + "&name=PC1%20Ethernet0%20-%20PC2%20Ethernet0"

	// A stand-in for Wireshark says what it was given and what its
	// extcap lists with the environment it got: the link of this server,
	// though no configuration names it.
	extcap := built(t, "labtap-extcap", "../extcap")
	out := t.TempDir()
	fake := filepath.Join(out, "wireshark")
	script := "#!/bin/sh\nprintf '%s\\n' \"$@\" > \"$OUT/argv\"\ntshark -D > \"$OUT/D.tmp\" 2>&1\nmv \"$OUT/D.tmp\" \"$OUT/D\"\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	linkIface := "labtap_" + lab.projectID + "_" + lab.link.LinkID
	for _, c := range []struct{ url, iface string }{
		{button, linkIface},
		{tree[0], "labtap_" + lab.projectID + "_all"},
		{tree[1], linkIface},
		{gns3, linkIface},
	} {
		os.Remove(filepath.Join(out, "D"))
		cmd := exec.CommandContext(t.Context(), extcap, "--open", c.url)
		cmd.Env = append(env, "LABTAP_WIRESHARK="+fake, "OUT="+out)
		if msg, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("labtap-extcap --open %s: %v\n%s", c.url, err, msg)
		}
		var listed []byte
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			var err error
			if listed, err = os.ReadFile(filepath.Join(out, "D")); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the stand-in for Wireshark did not run", c.url)
			}
		}
		if argv := mustRead(t, filepath.Join(out, "argv")); string(argv) != "-k\n-i\n"+c.iface+"\n" {
			t.Errorf("%s: Wireshark's arguments %q, want -k -i %s", c.url, argv, c.iface)
		}
		if !strings.Contains(string(listed), linkIface+" (labtap: PC1 Ethernet0 ↔ PC2 Ethernet0 (one click))") {
			t.Errorf("%s: Wireshark's extcap does not list the link:\n%s", c.url, listed)
		}
	}
}

// rowClock reads tshark's rows (-T fields -e frame.time_epoch) as they come
// and keeps, for each, how long after the frame crossed the link (the
// agent's timestamp of it) the row was printed.
type rowClock struct {
	mu   sync.Mutex
	lags []time.Duration
	rows chan struct{}
}

func newRowClock(r io.Reader) *rowClock {
	rc := &rowClock{rows: make(chan struct{}, 1<<16)}
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			now := time.Now()
			epoch, err := strconv.ParseFloat(strings.TrimSpace(sc.Text()), 64)
			if err != nil {
				continue
			}
			rc.add(now.Sub(time.Unix(0, int64(epoch*1e9))))
		}
	}()
	return rc
}

// newRecordClock reads a pcap stream itself: the time from a frame
// crossing the link to its ICMP record arriving, labtap's part alone.
func newRecordClock(r io.Reader) *rowClock {
	rc := &rowClock{rows: make(chan struct{}, 1<<16)}
	go func() {
		pr, err := pcapgo.NewReader(r)
		if err != nil {
			return
		}
		for {
			data, ci, err := pr.ReadPacketData()
			if err != nil {
				return
			}
			if len(data) > 23 && data[12] == 0x08 && data[13] == 0x00 && data[23] == 1 { // IPv4, ICMP
				rc.add(time.Since(ci.Timestamp))
			}
		}
	}()
	return rc
}

func (rc *rowClock) add(lag time.Duration) {
	rc.mu.Lock()
	rc.lags = append(rc.lags, lag)
	rc.mu.Unlock()
	rc.rows <- struct{}{}
}

// wait waits for n more rows, and says whether they came within 30 s.
func (rc *rowClock) wait(n int) bool {
	for range n {
		select {
		case <-rc.rows:
		case <-time.After(30 * time.Second):
			return false
		}
	}
	return true
}

// reset forgets the rows so far.
func (rc *rowClock) reset() {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.lags = nil
}

// quantile is the q-quantile of the lags, in milliseconds.
func (rc *rowClock) quantile(q float64) float64 {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	l := slices.Clone(rc.lags)
	slices.Sort(l)
	if len(l) == 0 {
		return 0
	}
	return float64(l[int(q*float64(len(l)-1))]) / 1e6
}

// BenchmarkWiresharkLiveLatency measures, for the frames of a VPCS ping,
// the time from a frame crossing the link (its capture timestamp) to its
// row in tshark, through labtap-extcap (tshark -i labtap_…) beside
// today's /pcap stream piped into tshark -i -, both following the same
// capture at the same time, and (stream-*) to the record's arrival in a
// /pcap stream read here, labtap's part alone. Each iteration is one ping (a request and its
// reply in each tshark).
func BenchmarkWiresharkLiveLatency(b *testing.B) {
	testenv.RequireTools(b, "vpcs", "tshark", "dumpcap")
	c := startController(b)
	lab := c.twoPCs("latency", "local", "local", "10.0.0.1", "10.0.0.2")
	for _, p := range lab.pcs {
		c.call("POST", lab.base+"/nodes/"+p.node.NodeID+"/start", nil, 200, &p.node)
		con, err := node.DialConsole(b.Context(), net.JoinHostPort(p.node.ConsoleHost, fmt.Sprint(p.node.Console)))
		if err != nil {
			b.Fatal(err)
		}
		defer con.Close()
		p.con = con
	}
	for _, p := range lab.pcs {
		if _, err := p.try(b.Context(), "ip "+p.ip+"/24"); err != nil {
			b.Fatal(err)
		}
	}
	linkPath := lab.base + "/links/" + lab.link.LinkID
	c.call("POST", linkPath+"/start_capture", map[string]any{}, 201, nil)
	env := wiresharkHome(b, []map[string]string{{"url": c.url}})
	fields := []string{"-l", "-Y", "icmp", "-T", "fields", "-e", "frame.time_epoch"}

	extcap := exec.CommandContext(b.Context(), "tshark", append([]string{"-i", "labtap_" + lab.projectID + "_" + lab.link.LinkID}, fields...)...)
	extcap.Env = env
	viaExtcap, err := extcap.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	resp, err := http.Get(c.url + linkPath + "/pcap")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	// A pipe of its own, not the body itself: Wait would wait for the copy
	// of a stream that does not end.
	pr, pw, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	go func() { io.Copy(pw, resp.Body); pw.Close() }()
	defer pr.Close()
	piped := exec.CommandContext(b.Context(), "tshark", append([]string{"-i", "-"}, fields...)...)
	piped.Stdin = pr
	errFile, err := os.Create(filepath.Join(b.TempDir(), "tshark.err"))
	if err != nil {
		b.Fatal(err)
	}
	piped.Stderr, extcap.Stderr = errFile, errFile
	viaPcap, err := piped.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	for _, cmd := range []*exec.Cmd{extcap, piped} {
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	}
	raw, err := http.Get(c.url + linkPath + "/pcap")
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Body.Close()
	ext, pcap, rec := newRowClock(viaExtcap), newRowClock(viaPcap), newRecordClock(raw.Body)
	waitRows := func() {
		for _, w := range []struct {
			rc  *rowClock
			how string
		}{{ext, "through the extcap"}, {pcap, "through /pcap"}, {rec, "in the /pcap stream"}} {
			if !w.rc.wait(2) {
				data, _ := os.ReadFile(errFile.Name())
				b.Fatalf("no row %s 30 s after a ping; the tsharks said:\n%s", w.how, data)
			}
		}
	}
	// Both tsharks are up once each shows a first ping.
	lab.pcs[0].try(b.Context(), "ping 10.0.0.2 -c 1")
	waitRows()
	ext.reset()
	pcap.reset()
	rec.reset()

	steal0 := stealTicks()
	for b.Loop() {
		if _, err := lab.pcs[0].try(b.Context(), "ping 10.0.0.2 -c 1"); err != nil {
			b.Fatal(err)
		}
		waitRows()
	}
	b.StopTimer()
	b.ReportMetric(ext.quantile(0.5), "extcap-p50-ms")
	b.ReportMetric(ext.quantile(0.95), "extcap-p95-ms")
	b.ReportMetric(pcap.quantile(0.5), "pcap-p50-ms")
	b.ReportMetric(pcap.quantile(0.95), "pcap-p95-ms")
	b.ReportMetric(rec.quantile(0.5), "stream-p50-ms")
	b.ReportMetric(rec.quantile(0.95), "stream-p95-ms")
	b.ReportMetric(ext.quantile(0.5)/pcap.quantile(0.5), "extcap/pcap-p50")
	b.ReportMetric(float64(stealTicks()-steal0), "steal-ticks")
}

// stealTicks is the machine's steal time so far (/proc/stat), in ticks.
func stealTicks() int64 {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	f := strings.Fields(strings.SplitN(string(data), "\n", 2)[0])
	if len(f) < 9 {
		return 0
	}
	n, _ := strconv.ParseInt(f[8], 10, 64)
	return n
}

func TestWiresharkCapturesFromAnHTTPSServerTrustedByItsCAFingerprint(t *testing.T) {
	testenv.RequireTools(t, "vpcs", "tshark", "dumpcap")
	c, _ := startTLSController(t, nil)
	m := caLine.FindStringSubmatch(c.log.String())
	if m == nil {
		t.Fatalf("no ca_sha256 in the start log:\n%s", c.log.String())
	}
	lab := c.twoPCs("tls lab", "local", "local", "10.0.0.1", "10.0.0.2")
	for _, p := range lab.pcs {
		c.call("POST", lab.base+"/nodes/"+p.node.NodeID+"/start", nil, 200, &p.node)
		con, err := node.DialConsole(t.Context(), net.JoinHostPort(p.node.ConsoleHost, fmt.Sprint(p.node.Console)))
		if err != nil {
			t.Fatal(err)
		}
		defer con.Close()
		p.con = con
	}
	setAddresses(t, lab.pcs)
	linkPath := lab.base + "/links/" + lab.link.LinkID
	c.call("POST", linkPath+"/start_capture", map[string]any{}, 201, nil)
	lab.pcs[0].ping(t, "10.0.0.2", 1)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	// The CA's fingerprint, as the controller logs it, in the configuration.
	env := wiresharkHome(t, []map[string]string{{"url": c.url, "ca_sha256": m[1]}})
	linkIface := "labtap_" + lab.projectID + "_" + lab.link.LinkID
	file := filepath.Join(t.TempDir(), "tls.pcap")
	out, err := tsharkIn(ctx, env, "-i", linkIface, "-c", "2", "-a", "duration:60", "-w", file)
	if err != nil || !strings.Contains(out, "2 packets captured") {
		t.Fatalf("tshark over HTTPS: %v\n%s", err, out)
	}
	if n := tsharkCount(t, file, "icmp || arp"); n != 2 {
		t.Errorf("%d of the ping's packets over HTTPS, want 2", n)
	}

	// Another fingerprint: the server is not trusted, and the list says so.
	env = wiresharkHome(t, []map[string]string{{"url": c.url, "ca_sha256": strings.Repeat("AB:", 31) + "AB"}})
	out, _ = tsharkIn(ctx, env, "-D")
	if strings.Contains(out, linkIface) || !strings.Contains(out, "labtap_server0_unlisted (labtap: "+c.url+": cannot be listed") {
		t.Errorf("tshark -D with another CA fingerprint:\n%s", out)
	}
}
