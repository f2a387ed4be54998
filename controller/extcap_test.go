package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/labtap/labtap/agent/node"
	"github.com/labtap/labtap/internal/testenv"
)

// wiresharkHome makes a home directory whose Wireshark finds
// labtap-extcap in its personal extcap folder (~/.config/wireshark/extcap
// for Wireshark 4.0 and older, ~/.local/lib/wireshark/extcap from 4.1:
// both get it) and whose ~/.config/labtap/extcap.json names the server.
// It returns the environment of a tshark that uses them.
func wiresharkHome(t *testing.T, servers any) []string {
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

	// A wrong password, as Wireshark's dialog stores it for the interface:
	// the capture fails with the server's refusal in Wireshark's error.
	out, err = tsharkIn(ctx, env, "-o", extcapPref(linkIface, "user")+":"+user, "-o", extcapPref(linkIface, "password")+":wrong",
		"-i", linkIface, "-a", "duration:3", "-w", filepath.Join(t.TempDir(), "refused.pcap"))
	if err == nil || !strings.Contains(out, `refused the login (401): user "admin" or its password is wrong`) {
		t.Errorf("tshark with a wrong password: %v, want a failure saying so:\n%s", err, out)
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
