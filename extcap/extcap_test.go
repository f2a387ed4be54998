package main

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const (
	pid = "1fd0bb53-af4e-4cc3-9032-b42953d88f71"
	lid = "112a6912-52c3-459a-b611-9c61add03693"
)

func TestOpenURLTakesGNS3WebUIsPcapURLAndLabtapsOwn(t *testing.T) {
	for _, c := range []struct {
		url  string
		want target
	}{
		// What GNS3's web UI opens for a link's capture.
		{"gns3+pcap://127.0.0.1:3080?project_id=" + pid + "&link_id=" + lid + "&name=PC1%20Ethernet0%20-%20PC2%20Ethernet0",
			target{"http://127.0.0.1:3080", pid, lid}},
		// A name as encodeURIComponent leaves it.
		{"gns3+pcap://127.0.0.1:3080?project_id=" + pid + "&link_id=" + lid + "&name=Bob's%20PC%20(1)!",
			target{"http://127.0.0.1:3080", pid, lid}},
		{"gns3+pcap://lab.example.net:443?protocol=https&project_id=" + pid + "&link_id=" + lid,
			target{"https://lab.example.net:443", pid, lid}},
		{"labtap://[::1]:3080/?project_id=" + pid + "&link_id=" + lid, target{"http://[::1]:3080", pid, lid}},
		{"LABTAP://10.0.0.1?project_id=" + pid, target{"http://10.0.0.1:3080", pid, ""}}, // the whole project; GNS3's port
	} {
		got, err := parseOpenURL(c.url)
		if err != nil || got != c.want {
			t.Errorf("parseOpenURL(%q) = %+v, %v; want %+v", c.url, got, err, c.want)
		}
	}
}

func TestOpenURLRefusesHostileURLs(t *testing.T) {
	q := "?project_id=" + pid + "&link_id=" + lid
	for _, u := range []string{
		"",
		"http://127.0.0.1:3080/" + q, // not our scheme: no browser page opens Wireshark on any URL
		"javascript:alert(1)",
		"file:///etc/passwd",
		"labtap:opaque" + q,
		"labtap://user:pw@127.0.0.1:3080" + q,
		"labtap://127.0.0.1:3080/v2/x" + q,
		"labtap://127.0.0.1:3080" + q + "#frag",
		"labtap://127.0.0.1:3080" + q + "&x=1",                 // unknown parameter
		"labtap://127.0.0.1:3080" + q + "&link_id=" + lid,      // twice
		"labtap://127.0.0.1:3080" + q + "&protocol=file",       // only http, https
		"labtap://127.0.0.1:0" + q,                             // port
		"labtap://127.0.0.1:70000" + q,                         // port
		"labtap://127.0.0.1:080" + q,                           // port, not as written
		"labtap://-oProxyCommand=x:3080" + q,                   // host that reads as an option
		"labtap://h%20ost:3080" + q,                            // host
		"labtap://é.example:3080" + q,                          // host
		"labtap://127.0.0.1:3080?project_id=-k&link_id=" + lid, // id that reads as an option
		"labtap://127.0.0.1:3080?project_id=" + pid + "&link_id=--extcap-interfaces",
		"labtap://127.0.0.1:3080?project_id=" + pid + "%3Brm&link_id=" + lid,
		"labtap://127.0.0.1:3080?project_id=$(id)&link_id=" + lid,
		"labtap://127.0.0.1:3080?project_id=" + pid + "&link_id=all", // "all" is the project's own interface
		"labtap://127.0.0.1:3080?project_id=" + pid + "&link_id=a_b", // an underscore would part the interface name
		"labtap://127.0.0.1:3080?project_id=" + strings.Repeat("a", 65),
		"labtap://127.0.0.1:3080?link_id=" + lid,       // no project
		"gns3+pcap://127.0.0.1:3080?project_id=" + pid, // GNS3's names a link
		"labtap://127.0.0.1:3080" + q + "&name=" + strings.Repeat("n", maxNameLen+1),
		"labtap://127.0.0.1:3080" + q + "&name=" + strings.Repeat("n", maxURLLen),
		"labtap://127.0.0.1:3080" + q + " -o x",
		"labtap://127.0.0.1:3080" + q + "\n-o",
		"labtap://127.0.0.1:3080" + q + "%",
		"labtap://127.0.0.1:3080" + q + `" --server "http://elsewhere`, // a Windows command line's quotes
		"labtap://127.0.0.1:3080" + q + "'$(id)'",                      // in an id
		"labtap://127.0.0.1:3080" + q + "`id`",
		"labtap://127.0.0.1:3080" + q + "\\host\\share",
		"labtap://127.0.0.1:3080" + q + "&name=é",
	} {
		if got, err := parseOpenURL(u); err == nil {
			t.Errorf("parseOpenURL(%.80q) = %+v, want an error", u, got)
		}
	}
}

func TestOpenURLStartsWiresharkWithOnlyTheCheckedInterfaceAndTheServerInItsEnvironment(t *testing.T) {
	tg := target{"http://127.0.0.1:3080", pid, lid}
	argv, env := wiresharkCommand(tg, "/usr/bin/wireshark", []string{"PATH=/bin", "LABTAP_URL=http://other:3080", "LABTAP_USER=u", "LABTAP_PASSWORD=p"})
	if want := []string{"/usr/bin/wireshark", "-k", "-i", "labtap_" + pid + "_" + lid}; !slices.Equal(argv, want) {
		t.Errorf("argv %q, want %q", argv, want)
	}
	// Credentials of another server do not follow to this one.
	if want := []string{"PATH=/bin", "LABTAP_URL=http://127.0.0.1:3080"}; !slices.Equal(env, want) {
		t.Errorf("env %q, want %q", env, want)
	}
	_, env = wiresharkCommand(tg, "wireshark", []string{"LABTAP_URL=http://127.0.0.1:3080/", "LABTAP_USER=u", "LABTAP_PASSWORD=p"})
	if want := []string{"LABTAP_USER=u", "LABTAP_PASSWORD=p", "LABTAP_URL=http://127.0.0.1:3080"}; !slices.Equal(env, want) {
		t.Errorf("env %q, want %q", env, want)
	}

	var ran [][]string
	startProgram = func(argv, env []string) error { ran = append(ran, argv); return nil }
	t.Cleanup(func() { startProgram = startProgramDefault })
	t.Setenv("LABTAP_WIRESHARK", "/opt/ws")
	var stderr bytes.Buffer
	if code := run(t.Context(), []string{"--open", "labtap://127.0.0.1:3080?project_id=" + pid}, &stderr, &stderr); code != 0 {
		t.Fatalf("--open: %d %s", code, &stderr)
	}
	if code := run(t.Context(), []string{"--open", "labtap://127.0.0.1:3080?project_id=;reboot"}, &stderr, &stderr); code != 1 {
		t.Fatalf("--open of a bad URL: %d, want 1", code)
	}
	if len(ran) != 1 || !slices.Equal(ran[0], []string{"/opt/ws", "-k", "-i", "labtap_" + pid + "_all"}) {
		t.Errorf("started %q", ran)
	}
}

func TestInterfaceNamesRoundTripAndRefuseOthers(t *testing.T) {
	for _, c := range [][2]string{{pid, lid}, {pid, ""}} {
		p, l, err := parseIface(ifaceName(c[0], c[1]))
		if err != nil || p != c[0] || l != c[1] {
			t.Errorf("%v: %q %q %v", c, p, l, err)
		}
	}
	for _, n := range []string{"", "eth0", "labtap_", "labtap_" + pid, "labtap__" + lid, "labtap_" + pid + "_", "labtap_" + pid + "_a_b", "labtap_-x_" + lid} {
		if _, _, err := parseIface(n); err == nil {
			t.Errorf("parseIface(%q) took it", n)
		}
	}
}

func TestAServersNamesCannotBreakAnExtcapLine(t *testing.T) {
	got := linkName(linkJSON{Nodes: []endpointJSON{{NodeID: "a", Adapter: 0, Port: 0}, {NodeID: "b", Adapter: 1, Port: 2}}},
		[]nodeJSON{{NodeID: "a", Name: "PC1}{display=x", Ports: []portJSON{{Name: "Ethernet0"}}}, {NodeID: "b", Name: "R\n1"}})
	if want := "PC1__display=x Ethernet0 ↔ R 1 1/2"; got != want {
		t.Errorf("linkName = %q, want %q", got, want)
	}
	if got := display(strings.Repeat("é", 100)); len([]rune(got)) != maxDisplay {
		t.Errorf("display is %d runes, want %d", len([]rune(got)), maxDisplay)
	}
}

func TestServersComeFromTheOptionsThenTheEnvironmentThenTheFile(t *testing.T) {
	file := []server{{URL: "http://a:3080", User: "fa", Password: "fp"}, {URL: "http://b:3080"}}
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	if got := resolveServers(options{}, getenv, file); !slices.Equal(got, file) {
		t.Errorf("file: %+v", got)
	}
	env["LABTAP_URL"] = "http://a:3080/"
	if got := resolveServers(options{}, getenv, file); !slices.Equal(got, []server{{URL: "http://a:3080/", User: "fa", Password: "fp"}}) {
		t.Errorf("environment, credentials from the file: %+v", got)
	}
	env["LABTAP_USER"], env["LABTAP_PASSWORD"] = "eu", "ep"
	if got := resolveServers(options{}, getenv, file); !slices.Equal(got, []server{{URL: "http://a:3080/", User: "eu", Password: "ep"}}) {
		t.Errorf("environment: %+v", got)
	}
	if got := resolveServers(options{Server: "http://a:3080"}, getenv, file); !slices.Equal(got, []server{{URL: "http://a:3080", User: "eu", Password: "ep"}}) {
		t.Errorf("option without credentials: %+v", got)
	}
	if got := resolveServers(options{Server: "http://b:3080", User: "ou", Password: "op"}, getenv, file); !slices.Equal(got, []server{{URL: "http://b:3080", User: "ou", Password: "op"}}) {
		t.Errorf("options: %+v", got)
	}
}

func TestWiresharksQuestionsGetExtcapAnswers(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("LABTAP_URL", "http://127.0.0.1:3080")
	iface := ifaceName(pid, lid)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--extcap-dlts", "--extcap-interface", iface}, 0, "dlt {number=1}{name=EN10MB}{display=Ethernet}\n"},
		{[]string{"--extcap-config", "--extcap-interface", iface}, 0, "{call=--server}{display=Server URL}{type=string}{default=http://127.0.0.1:3080}"},
		{[]string{"--extcap-config", "--extcap-interface", iface}, 0, "{call=--password}{display=Password}{type=password}"},
		// A capture filter check: nothing is valid, a line is the error.
		{[]string{"--extcap-interface", iface, "--extcap-capture-filter", "icmp"}, 0, ""},
		{[]string{"--extcap-interface", iface, "--extcap-capture-filter", strings.Repeat("x", 5000)}, 0, "capture filter longer than labtap's 4096 bytes\n"},
		{[]string{"--extcap-dlts", "--extcap-interface", "eth0"}, 1, ""},
		{[]string{"--capture", "--extcap-interface", iface}, 1, ""}, // no fifo
		{[]string{"--no-such-option"}, 2, ""},
		{[]string{"stray"}, 2, ""},
		{nil, 2, ""},
	} {
		var stdout, stderr bytes.Buffer
		code := run(t.Context(), c.args, &stdout, &stderr)
		if code != c.code || c.want == "" && stdout.Len() != 0 || !strings.Contains(stdout.String(), c.want) {
			t.Errorf("%q: %d %q (stderr %q); want %d %q", c.args, code, &stdout, &stderr, c.code, c.want)
		}
	}
}

func TestAServerThatCannotBeListedShowsAsAnInterfaceThatSaysWhy(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("LABTAP_URL", gone)
	var stdout, stderr bytes.Buffer
	if code := run(t.Context(), []string{"--extcap-interfaces", "--extcap-version=4.0"}, &stdout, &stderr); code != 0 {
		t.Fatalf("--extcap-interfaces: %d %s", code, &stderr)
	}
	want := "interface {value=labtap_server0_unlisted}{display=labtap: " + gone + ": cannot be listed: capture here to see why}\n"
	if !strings.HasPrefix(stdout.String(), "extcap {version=") || !strings.HasSuffix(stdout.String(), want) {
		t.Errorf("list:\n%s\nwant its last line %q", &stdout, want)
	}
	// Capturing it says all, in Wireshark's error.
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := os.WriteFile(fifo, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	stderr.Reset()
	code := run(t.Context(), []string{"--capture", "--extcap-interface", "labtap_server0_unlisted", "--fifo", fifo}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "labtap server "+gone+" cannot be reached") {
		t.Errorf("capture: %d %q", code, &stderr)
	}
	for _, n := range []string{"labtap_server00_unlisted", "labtap_serverx_unlisted", "labtap_server1_unlisted2"} {
		p, l, _ := parseIface(n)
		if _, ok := unlistedServer(p, l); ok {
			t.Errorf("%s taken for a server's stand-in", n)
		}
	}
}

// FuzzOpenURL holds, for any URL a page may hand the handler, that what
// reaches Wireshark is an interface name of checked ids and a server URL
// of a checked host and port, or nothing.
func FuzzOpenURL(f *testing.F) {
	for _, s := range []string{
		"labtap://127.0.0.1:3080?project_id=" + pid + "&link_id=" + lid,
		"gns3+pcap://[::1]:3080?project_id=" + pid + "&link_id=" + lid + "&name=PC1&protocol=https",
		"labtap://h?project_id=a&link_id=-k",
		"labtap://h:1/?project_id=a%00b",
	} {
		f.Add(s)
	}
	ifaceRe := regexp.MustCompile(`^labtap_[0-9A-Za-z][0-9A-Za-z-]{0,63}_[0-9A-Za-z][0-9A-Za-z-]{0,63}$`)
	serverRe := regexp.MustCompile(`^https?://([0-9A-Za-z.-]+|\[[0-9A-Fa-f:.]+\]):[1-9][0-9]{0,4}$`)
	f.Fuzz(func(t *testing.T, raw string) {
		tg, err := parseOpenURL(raw)
		if err != nil {
			return
		}
		argv, _ := wiresharkCommand(tg, "wireshark", nil)
		if len(argv) != 4 || !ifaceRe.MatchString(argv[3]) || !serverRe.MatchString(tg.server) {
			t.Fatalf("%q gave %q, server %q", raw, argv, tg.server)
		}
		if _, err := checkServerURL(tg.server); err != nil {
			t.Fatalf("%q gave server %q: %v", raw, tg.server, err)
		}
	})
}
