package main

import (
	"crypto/md5"
	"encoding/hex"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/labtap/labtap/internal/gns3wizard"
	"github.com/labtap/labtap/internal/testenv"
)

// These tests install the appliances of GET /v2/appliances the way GNS3's
// GUI wizard does (POST /v2/templates), make a node of each template and
// start it for real: docker nodes of the images scripts/node-images builds,
// and the tiny guest of scripts/tiny-guest under QEMU.

// appliances lists GET /v2/appliances by name, waiting up to within for
// want to be listed (a QEMU appliance is listed once its files' md5 sums
// are known).
func (c *controller) appliances(want string, within time.Duration) map[string]map[string]any {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for {
		var list []map[string]any
		c.call("GET", "/v2/appliances", nil, 200, &list)
		out := map[string]map[string]any{}
		for _, a := range list {
			name, _ := a["name"].(string)
			out[name] = a
		}
		if out[want] != nil {
			return out
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("GET /v2/appliances lists no %q within %v: %v", want, within, list)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// installAppliance posts the wizard's template for an appliance and makes
// a node of it in the project at base.
func (c *controller) installAppliance(base string, appliance map[string]any, version, qemuPath string) nodeReply {
	c.t.Helper()
	body, err := gns3wizard.Template(appliance, "local", version, qemuPath)
	if err != nil {
		c.t.Fatal(err)
	}
	var tpl struct {
		TemplateID string `json:"template_id"`
	}
	c.call("POST", "/v2/templates", body, 201, &tpl)
	var n nodeReply
	c.call("POST", base+"/templates/"+tpl.TemplateID, map[string]any{"x": 0, "y": 0}, 201, &n)
	return n
}

func TestApplianceTemplatesStartTheirDockerNodes(t *testing.T) {
	testenv.Docker(t, frrImage, hostImage)
	c := startControllerWith(t, t.TempDir(), dockerInit(t))
	list := c.appliances("labtap FRR", 10*time.Second)
	base := newProject(c, "appliances")
	nodes := map[string]nodeReply{}
	for name, image := range map[string]string{"labtap FRR": frrImage, "labtap Debian host": hostImage} {
		n := c.installAppliance(base, list[name], "", "")
		c.call("POST", base+"/nodes/"+n.NodeID+"/start", nil, 200, &n)
		if n.Status != "started" || n.Console == 0 {
			t.Fatalf("%s: started node %+v", name, n)
		}
		out, err := exec.Command("docker", "inspect", "-f", "{{.Config.Image}} {{.State.Running}}", container(n)).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != image+" true" {
			t.Fatalf("%s: container %s: %v %s, want %s running", name, container(n), err, out, image)
		}
		nodes[name] = n
	}
	// FRR's daemons run (they exit where the container lacks what they need).
	waitIn(t, nodes["labtap FRR"], 60*time.Second, "ospfd", "vtysh", "-c", "show daemons")
	c.call("DELETE", base, nil, 204, nil)
}

func TestApplianceTemplateBootsTheTinyGuest(t *testing.T) {
	guest := tinyGuest(t)
	c := startController(t)
	copyImages(t, c, guest)
	a := c.appliances("labtap tiny guest", 30*time.Second)["labtap tiny guest"]
	for _, im := range a["images"].([]any) {
		m := im.(map[string]any)
		name := m["filename"].(string)
		sum := md5.Sum(mustRead(t, filepath.Join(guest, name)))
		if m["md5sum"] != hex.EncodeToString(sum[:]) {
			t.Fatalf("%s: md5sum %v, want the file's %x", name, m["md5sum"], sum)
		}
	}
	// The wizard's QEMU binary page offers the compute's binaries.
	var bins []struct {
		Path string `json:"path"`
	}
	c.call("GET", "/v2/computes/local/qemu/binaries", nil, 200, &bins)
	qemu := ""
	for _, b := range bins {
		if filepath.Base(b.Path) == "qemu-system-x86_64" {
			qemu = b.Path
		}
	}
	if qemu == "" {
		t.Fatalf("no qemu-system-x86_64 among %+v", bins)
	}
	base := newProject(c, "appliances")
	n := c.installAppliance(base, a, "local build", qemu)
	c.call("POST", base+"/nodes/"+n.NodeID+"/start", nil, 200, &n)
	if n.Status != "started" || n.Console == 0 {
		t.Fatalf("started node %+v", n)
	}
	con := dialGuest(t, n.ConsoleHost, n.Console)
	con.expect(t, 0, regexp.MustCompile(`labtap-guest ready`), 3*time.Minute)
	if out := con.run(t, "echo $((6*7))", time.Minute); strings.TrimSpace(out) != "42" {
		t.Fatalf("typed command printed %q, want 42", out)
	}
	c.call("DELETE", base, nil, 204, nil)
}
