package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto"
	"github.com/chromedp/chromedp"
	"github.com/labtap/labtap/agent/node"
	"github.com/labtap/labtap/internal/testenv"
)

// artifactDir is where browser tests leave their screenshots:
// $LABTAP_ARTIFACTS, else labtap-artifacts in the temporary directory.
func artifactDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("LABTAP_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "labtap-artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// browser starts a headless Chromium for the test.
func browser(t *testing.T) context.Context {
	t.Helper()
	testenv.RequireTools(t, "chromium")
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath("chromium"), chromedp.NoSandbox, chromedp.WindowSize(1280, 760),
		chromedp.Flag("disable-gpu", true), chromedp.Flag("hide-scrollbars", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(t.Context(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	return ctx
}

// waitJS waits, with a generous deadline, for a JavaScript condition to
// hold in the page (chromedp polls it at each animation frame).
func waitJS(t *testing.T, ctx context.Context, cond string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		err := chromedp.Run(ctx, chromedp.Poll(cond, nil))
		if contextReplaced(err) && ctx.Err() == nil {
			continue // a navigation ended the page the poll ran in: poll the new one
		}
		if err != nil {
			var dom string
			chromedp.Run(ctx, chromedp.OuterHTML("#view", &dom))
			t.Fatalf("waiting for %s: %v\n%s", cond, err, dom)
		}
		return
	}
}

// contextReplaced says whether err is Chromium's answer to an evaluation
// in a JavaScript context a navigation has just destroyed.
func contextReplaced(err error) bool {
	var e *cdproto.Error
	return errors.As(err, &e) && e.Code == -32000 && strings.Contains(e.Message, "Cannot find context")
}

func evalJS[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	var v T
	if err := chromedp.Run(ctx, chromedp.Evaluate(expr, &v)); err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return v
}

func TestTheBrowserViewShowsAPingLiveDecodedFilteredAndPaused(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the controller, runs VPCS and a browser")
	}
	testenv.RequireTools(t, "vpcs", "chromium")
	c := startController(t)
	lab := c.twoPCs("browser", "local", "local", "10.0.0.1", "10.0.0.2")
	linkPath := lab.base + "/links/" + lab.link.LinkID
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
	c.call("POST", linkPath+"/start_capture", map[string]any{}, 201, nil)

	// The page is loaded while a ping runs.
	pinged := make(chan error, 1)
	go func() {
		_, err := lab.pcs[0].try(t.Context(), "ping 10.0.0.2 -c 12")
		pinged <- err
	}()
	// From the front page: the project, its link, a click.
	ctx := browser(t)
	if err := chromedp.Run(ctx, chromedp.Navigate(c.url+"/")); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, `document.querySelector("#tree a.link.capturing") !== null`)
	if err := chromedp.Run(ctx, chromedp.Click("#tree a.link", chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	if got := evalJS[string](t, ctx, `location.pathname`); got != linkPath+"/view" {
		t.Fatalf("the page went to %s", got)
	}
	// Rows arrive as the ping goes on: requests and replies, decoded.
	waitJS(t, ctx, `[...document.querySelectorAll("#rows tr.p-icmp td.info")].filter(td => td.textContent.startsWith("Echo (ping) reply")).length >= 3`)
	rows := evalJS[[][]string](t, ctx, `[...document.querySelectorAll("#rows tr.p-icmp")].map(tr => [...tr.cells].map(td => td.textContent))`)
	req := rows[0] // No., Time, Sender, Source, Destination, Protocol, Length, Info
	if req[3] != "10.0.0.1" || req[4] != "10.0.0.2" || req[5] != "ICMP" || atoi(t, req[6]) < 98 ||
		!strings.HasPrefix(req[7], "Echo (ping) request  id=") || !strings.Contains(req[7], "seq=1/256, ttl=64") {
		t.Fatalf("first ICMP row: %q", req)
	}
	// The link is in the tree, named after its ends, marked capturing.
	if got := evalJS[string](t, ctx, `document.querySelector("#tree a.link.current.capturing").textContent`); got != "PC1 e0 ↔ PC2 e0" {
		t.Fatalf("tree entry %q", got)
	}
	// Selecting a row shows its protocol tree and bytes; then the screenshot.
	if err := chromedp.Run(ctx, chromedp.Click(`#rows tr.p-icmp`, chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, `document.querySelector("#tree-details").textContent.includes("Internet Control Message Protocol")`)
	if b := evalJS[string](t, ctx, `document.querySelector("#bytes").textContent`); !strings.HasPrefix(b, "0000  ") {
		t.Fatalf("bytes pane: %q", b)
	}
	var png []byte
	if err := chromedp.Run(ctx, chromedp.CaptureScreenshot(&png)); err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(artifactDir(t), "capture-view.png")
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", shot)

	// Pause: rows wait while another ping goes on, and come back on resume.
	if err := <-pinged; err != nil {
		t.Fatal(err)
	}
	chromedp.Run(ctx, chromedp.Click("#pause", chromedp.ByID))
	shown := evalJS[int](t, ctx, `document.querySelectorAll("#rows tr").length`)
	lab.pcs[1].run(t, "ping 10.0.0.1 -c 2")
	waitJS(t, ctx, `/ [1-9][0-9]* waiting \(paused\)/.test(document.querySelector("#counts").textContent)`)
	if n := evalJS[int](t, ctx, `document.querySelectorAll("#rows tr").length`); n != shown {
		t.Fatalf("%d rows while paused, %d at the pause", n, shown)
	}
	chromedp.Run(ctx, chromedp.Click("#pause", chromedp.ByID))
	waitJS(t, ctx, fmt.Sprintf(`document.querySelectorAll("#rows tr").length > %d`, shown))

	// "Download pcap" is the file as it is now, a valid pcap while the
	// capture goes on, under the file's name.
	href := evalJS[string](t, ctx, `document.querySelector("#download").href`)
	if !strings.HasSuffix(href, linkPath+"/capture_file") {
		t.Fatalf("Download pcap goes to %s", href)
	}
	var now linkReply
	c.call("GET", linkPath, nil, 200, &now)
	got := downloadCaptureFile(t, href, deref(now.CaptureFileName))
	if n := tsharkCount(t, got, "icmp"); n < 6 {
		t.Fatalf("the downloaded file holds %d ICMP frames, want the pings so far", n)
	}

	// Filters apply to the whole capture: a protocol name, a tcpdump
	// expression, and one libpcap refuses.
	filter := func(expr string) {
		t.Helper()
		set := fmt.Sprintf(`document.getElementById("filter").value = %q`, expr)
		if err := chromedp.Run(ctx, chromedp.Evaluate(set, nil), chromedp.Click(`#filterform button`, chromedp.ByQuery)); err != nil {
			t.Fatal(err)
		}
	}
	filter("arp")
	waitJS(t, ctx, `document.querySelector("#filter").className === "valid" && document.querySelectorAll("#rows tr").length > 0`)
	if n := evalJS[int](t, ctx, `document.querySelectorAll("#rows tr:not(.p-arp)").length`); n != 0 {
		t.Fatalf("%d rows that are not ARP under the arp filter", n)
	}
	filter("icmp[icmptype] == icmp-echoreply")
	waitJS(t, ctx, `document.querySelectorAll("#rows tr").length >= 10`)
	if n := evalJS[int](t, ctx, `[...document.querySelectorAll("#rows td.info")].filter(td => !td.textContent.startsWith("Echo (ping) reply")).length`); n != 0 {
		t.Fatalf("%d rows that are not echo replies under a BPF filter", n)
	}
	filter("icmp[[ nonsense")
	waitJS(t, ctx, `document.querySelector("#filter").className === "invalid" && document.querySelector("#message").textContent.includes("Invalid display filter")`)

	// Stopping the capture from the page ends the feed.
	filter("")
	chromedp.Run(ctx, chromedp.Click("#capture", chromedp.ByID))
	waitJS(t, ctx, `document.querySelector("#capture").textContent === "Start capture" && document.querySelector("#status").textContent === "stopped"`)
	var l linkReply
	c.call("GET", linkPath, nil, 200, &l)
	if l.Capturing {
		t.Fatal("the link still captures after Stop capture in the page")
	}
	// A link's own address opens the page on it.
	if err := chromedp.Run(ctx, chromedp.Navigate(c.url+linkPath+"/view")); err != nil {
		t.Fatal(err)
	}
	// Its capture stopped: the page shows the stopped file, to its end.
	waitJS(t, ctx, `document.querySelector("#crumbs").textContent === "browser › PC1 e0 ↔ PC2 e0" && document.querySelector("#status").textContent === "stopped" && [...document.querySelectorAll("#rows td.info")].some(td => td.textContent.startsWith("Echo (ping) reply"))`)
	// The project's capture files are listed, and each opens in the view.
	waitJS(t, ctx, `[...document.querySelectorAll("#tree a.file")].some(a => a.textContent.includes("PC1_0-0_to_PC2_0-0.pcap"))`)
	fileView := lab.base + "/captures/local/PC1_0-0_to_PC2_0-0.pcap/view"
	if err := chromedp.Run(ctx, chromedp.Navigate(c.url+fileView)); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, `document.querySelector("#crumbs").textContent.includes("PC1_0-0_to_PC2_0-0.pcap") && [...document.querySelectorAll("#rows td.info")].some(td => td.textContent.startsWith("Echo (ping) reply")) && document.querySelector("#download").getAttribute("href").endsWith("/captures/local/PC1_0-0_to_PC2_0-0.pcap")`)
	if err := chromedp.Run(ctx, chromedp.Navigate(c.url+linkPath+"/view")); err != nil {
		t.Fatal(err)
	}
	waitJS(t, ctx, `document.querySelector("#status").textContent === "stopped"`)
	// A capture started elsewhere (here, the API) shows at once: the page
	// follows the project's notifications.
	c.call("POST", linkPath+"/start_capture", map[string]any{"capture_file_name": "again"}, 201, nil)
	waitJS(t, ctx, `document.querySelector("#status").textContent === "live"`)
	lab.pcs[0].run(t, "ping 10.0.0.2 -c 1")
	waitJS(t, ctx, `[...document.querySelectorAll("#rows td.info")].some(td => td.textContent.startsWith("Echo (ping) reply"))`)
}
