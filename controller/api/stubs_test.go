package api_test

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/labtap/labtap/controller/api"
	"github.com/labtap/labtap/controller/compute"
	"github.com/labtap/labtap/controller/project"
	"golang.org/x/sys/unix"
)

// What the GUI asks at every connect and every time Preferences opens
// answers without an error.
func TestConnectAndPreferencesCallsAnswerWithoutErrors(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	for _, path := range []string{"/v2/appliances", "/v2/appliances?symbol_theme=Classic", "/v2/appliances?update=yes&symbol_theme=nope",
		"/v2/gns3vm/engines", "/v2/gns3vm/engines/vmware/vms", "/v2/gns3vm/engines/remote/vms",
		"/v2/computes/local/iou/images", "/v2/computes/local/dynamips/images", "/v2/computes/local/virtualbox/vms",
		"/v2/computes/local/vmware/vms", "/v2/compute/iou/images", "/v2/compute/vmware/vms"} {
		r := s.do("GET", path, nil)
		if r.status != 200 || string(r.raw) != "[]" || r.header.Get("Content-Type") != "application/json" {
			t.Errorf("GET %s = %d %s", path, r.status, r.raw)
		}
	}
	s.must("GET", "/v2/gns3vm/engines/nope/vms", nil, 404, "/v2/gns3vm/engines/{engine}/vms")
	s.must("GET", "/v2/computes/ghost/iou/images", nil, 404, "/v2/computes/{compute_id}/iou/images")
	vm := s.must("GET", "/v2/gns3vm", nil, 200, "/v2/gns3vm")
	want := map[string]any{"allocate_vcpus_ram": true, "enable": false, "engine": "vmware", "headless": false,
		"port": 80.0, "ram": 2048.0, "vcpus": 1.0, "vmname": nil, "when_exit": "stop"}
	if d := jsonDiff("", want, vm.body); len(d) > 0 {
		t.Fatalf("GNS3 VM defaults: %v", d)
	}
	iou := s.must("GET", "/v2/iou_license", nil, 200, "/v2/iou_license")
	if iou.body["iourc_content"] != "" || iou.body["license_check"] != true || len(iou.body) != 2 {
		t.Fatalf("IOU license defaults %s", iou.raw)
	}
	if r := s.must("POST", "/v2/projects/load", map[string]any{"path": "/tmp/x.gns3"}, 403, "/v2/projects/load"); r.body["message"] != "Loading a project by path is only possible on a local server" {
		t.Fatalf("load %s", r.raw)
	}
	st := s.must("GET", "/v2/statistics", nil, 200, "/v2/statistics")
	if len(st.list) != 1 || st.list[0].(map[string]any)["compute_id"] != "local" || st.list[0].(map[string]any)["statistics"] == nil {
		t.Fatalf("statistics %s", st.raw)
	}
}

// Settings pages save: merged (GNS3 replaced them whole, then crashed),
// validated, kept across a restart; enabling a GNS3 VM is refused.
func TestPreferencesAreValidatedMergedAndKept(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "settings.json")
	newAPI := func() *server {
		reg := compute.NewRegistry(compute.RegistryConfig{Client: quickClient()})
		svc := project.NewService(project.Config{ProjectsDir: t.TempDir(), Computes: reg.Agents})
		app, _, err := api.New(api.Config{Projects: svc, Computes: reg, Agents: reg.Agents, Version: "2.2.59", SettingsFile: file})
		if err != nil {
			t.Fatal(err)
		}
		return &server{t: t, app: app}
	}
	s := newAPI()
	if r := s.must("PUT", "/v2/gns3vm", map[string]any{"enable": false, "vmname": "GNS3 VM"}, 201, "/v2/gns3vm"); r.body["engine"] != "vmware" || r.body["vmname"] != "GNS3 VM" {
		t.Fatalf("merged %s", r.raw)
	}
	s.must("PUT", "/v2/gns3vm", map[string]any{"engine": "qemu"}, 400, "/v2/gns3vm")
	s.must("PUT", "/v2/gns3vm", map[string]any{"foo": 1}, 400, "/v2/gns3vm")
	if r := s.must("PUT", "/v2/gns3vm", map[string]any{"enable": true}, 409, "/v2/gns3vm"); r.body["message"] != "labtap does not run a GNS3 VM" {
		t.Fatalf("enable %s", r.raw)
	}
	s.must("PUT", "/v2/iou_license", map[string]any{"iourc_content": "[license]\nhost = 0123;\n"}, 201, "/v2/iou_license")
	s.must("PUT", "/v2/iou_license", map[string]any{"license_check": "yes"}, 400, "/v2/iou_license")
	again := newAPI()
	if r := again.must("GET", "/v2/gns3vm", nil, 200, "/v2/gns3vm"); r.body["vmname"] != "GNS3 VM" || r.body["enable"] != false || r.body["ram"] != 2048.0 {
		t.Fatalf("after restart %s", r.raw)
	}
	if r := again.must("GET", "/v2/iou_license", nil, 200, "/v2/iou_license"); r.body["iourc_content"] != "[license]\nhost = 0123;\n" || r.body["license_check"] != true {
		t.Fatalf("license after restart %s", r.raw)
	}
}

// GET /v2/statistics gives each compute's real figures in GNS3's shape:
// memory and swap in bytes as /proc/meminfo has them, the disk of the data
// directory as statfs has it, the load average per CPU.
func TestStatisticsAreTheHostsFigures(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	st := s.must("GET", "/v2/statistics", nil, 200, "/v2/statistics")
	if len(st.list) != 1 {
		t.Fatalf("statistics %s", st.raw)
	}
	got := st.list[0].(map[string]any)["statistics"].(map[string]any)
	want := []string{"cpu_usage_percent", "disk_usage_percent", "load_average_percent", "memory_free", "memory_total",
		"memory_usage_percent", "memory_used", "swap_free", "swap_total", "swap_usage_percent", "swap_used"}
	if k := keys(got); !slices.Equal(k, want) {
		t.Fatalf("statistics keys %v", k)
	}
	meminfo, _ := os.ReadFile("/proc/meminfo")
	kb := func(name string) float64 {
		for line := range strings.SplitSeq(string(meminfo), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == name+":" {
				v, _ := strconv.ParseFloat(f[1], 64)
				return v * 1024
			}
		}
		t.Fatalf("no %s in /proc/meminfo", name)
		return 0
	}
	if got["memory_total"] != kb("MemTotal") || got["swap_total"] != kb("SwapTotal") {
		t.Errorf("memory_total %v (want %v), swap_total %v (want %v)", got["memory_total"], kb("MemTotal"), got["swap_total"], kb("SwapTotal"))
	}
	near := func(what string, v, w, tol float64) {
		if v < w-tol || v > w+tol {
			t.Errorf("%s = %v, want %v ± %v", what, v, w, tol)
		}
	}
	total := kb("MemTotal")
	near("memory_free", got["memory_free"].(float64), kb("MemFree"), total/10)
	near("memory_usage_percent", got["memory_usage_percent"].(float64), 100*(total-kb("MemAvailable"))/total, 10)
	if got["memory_used"].(float64) <= 0 || got["memory_used"].(float64) > total {
		t.Errorf("memory_used %v of %v", got["memory_used"], total)
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(s.data, &fs); err != nil {
		t.Fatal(err)
	}
	used, avail := float64(fs.Blocks-fs.Bfree), float64(fs.Bavail)
	near("disk_usage_percent", got["disk_usage_percent"].(float64), 100*used/(used+avail), 2)
	la, _ := os.ReadFile("/proc/loadavg")
	load15, _ := strconv.ParseFloat(strings.Fields(string(la))[2], 64)
	l := got["load_average_percent"].([]any)
	if len(l) != 3 {
		t.Fatalf("load_average_percent %v", l)
	}
	near("load_average_percent[2]", l[2].(float64), 100*load15/float64(runtime.NumCPU()), 10)
	if c := got["cpu_usage_percent"].(float64); c < 0 || c > 100 {
		t.Errorf("cpu_usage_percent %v", c)
	}
}

// The forwarded compute calls: the ones labtap has answer
// through their own routes (registered first); another action of an emulator labtap runs is 404 naming it, any call of
// one it does not run is 409 saying so, an unknown compute 404; the
// endpoint route hands back the controller's own route for the call.
func TestForwardedComputeCalls(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	const fwd = "/v2/computes/{compute_id}/{emulator}/{action:.+}"
	for _, c := range []struct {
		method, path string
		status       int
		msg          string
	}{
		{"GET", "/v2/computes/local/qemu/nothing/here", 404, "GET /qemu/nothing/here not found"},
		{"POST", "/v2/computes/local/qemu/nothing", 404, "POST /qemu/nothing not found"},
		{"PUT", "/v2/computes/local/vpcs/images", 404, "PUT /vpcs/images not found"},
		{"POST", "/v2/computes/local/iou/images/i86bi.bin", 409, "iou is not supported by this server"},
		{"GET", "/v2/computes/local/dynamips/idlepc", 409, "dynamips is not supported by this server"},
		{"PUT", "/v2/computes/local/virtualbox/vms/x", 409, "virtualbox is not supported by this server"},
		{"GET", "/v2/computes/ghost/qemu/nothing", 404, "Compute ID ghost doesn't exist"},
	} {
		r := s.must(c.method, c.path, nil, c.status, fwd)
		if msg, _ := r.body["message"].(string); !strings.HasPrefix(msg, c.msg) {
			t.Errorf("%s %s: %s", c.method, c.path, r.raw)
		}
	}
	const ep = "/v2/computes/endpoint/{compute_id}/{emulator}/{action:.+}"
	r := s.must("GET", "/v2/computes/endpoint/local/qemu/images/my%20disk.qcow2", nil, 200, ep)
	if r.body["endpoint"] != "http://example.com/v2/computes/local/qemu/images/my%20disk.qcow2" {
		t.Errorf("endpoint %s", r.raw)
	}
	s.must("GET", "/v2/computes/endpoint/local/iou/images/x", nil, 409, ep)
	s.must("GET", "/v2/computes/endpoint/ghost/qemu/images/x", nil, 404, ep)
}

// The web UI's image uploads for IOU and Dynamips, and the IOS router
// wizard's Idle-PC search (whose path is too short for the forwarded
// calls' template), are 409 saying the emulator is not run here, as the
// forwarded calls are, not a "No route" 404 or a 400.
func TestUploadsAndActionsOfEmulatorsNotRunHereAre409(t *testing.T) {
	s := newServer(t)
	for _, c := range []struct {
		path, route, msg string
		status           int
	}{
		{"/v2/compute/iou/images/i86bi-linux.bin", "/v2/compute/iou/images/{filename:.+}", "iou is not supported by this server", 409},
		{"/v2/compute/dynamips/images/sub/c7200.image", "/v2/compute/dynamips/images/{filename:.+}", "dynamips is not supported by this server", 409},
		{"/v2/computes/local/auto_idlepc", "/v2/computes/{compute_id}/auto_idlepc", "dynamips is not supported by this server", 409},
		{"/v2/computes/ghost/auto_idlepc", "/v2/computes/{compute_id}/auto_idlepc", "Compute ID ghost doesn't exist", 404},
	} {
		body := "{}"
		if strings.Contains(c.path, "/images/") {
			body = strings.Repeat("image bytes ", 2<<20) // 24 MiB: real images are over the 10 MiB body limit
		}
		r := s.must("POST", c.path, body, c.status, c.route)
		if r.body["message"] != c.msg || r.body["status"] != float64(c.status) {
			t.Errorf("POST %s: %s", c.path, r.raw)
		}
	}
}
