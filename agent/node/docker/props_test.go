package docker

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/labtap/labtap/dockerpolicy"
)

func TestVolumesAreCleanedDeduplicatedAndBounded(t *testing.T) {
	p := Properties{ExtraVolumes: []string{"/data/", "/etc", "/srv//www", "/data"}}
	got, err := p.volumes([]string{"/var/lib/x", "relative", "/proc/self"})
	if err != nil {
		t.Fatal(err)
	}
	// /etc swallows /etc/network; the image's odd VOLUMEs are left out.
	if want := []string{"/var/lib/x", "/data", "/etc", "/srv/www"}; !slices.Equal(got, want) {
		t.Fatalf("volumes %q, want %q", got, want)
	}
	for _, bad := range []string{"data", "/a/../b", "/", "/proc", "/sys/x", "/dev/shm", "/labtap", "/gns3volumes/x", "/a:b", "/a\nb", "/" + strings.Repeat("x", 255)} {
		_, err := Properties{ExtraVolumes: []string{bad}}.volumes(nil)
		if err == nil || !strings.Contains(err.Error(), "Persistent volume '"+bad+"' has invalid format") {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if _, err := (Properties{ExtraVolumes: make([]string, dockerpolicy.MaxVolumes+1)}).volumes(nil); err == nil {
		t.Error("too many volumes taken")
	}
}

func TestAVolumeDirectoryThatIsASymbolicLinkIsRefused(t *testing.T) {
	dir := t.TempDir()
	if err := prepareVolumes(dir, []string{"/etc/network", "/data"}); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(dir, "etc", "network")); err != nil || !st.IsDir() {
		t.Fatalf("etc/network: %v", err)
	}
	// What a container could leave in its volume: a link out of the node's
	// directory, where a later volume is to be.
	if err := os.Symlink("/", filepath.Join(dir, "data", "root")); err != nil {
		t.Fatal(err)
	}
	err := prepareVolumes(dir, []string{"/data/root"})
	if err == nil || !strings.Contains(err.Error(), "Persistent volume '/data/root'") {
		t.Fatalf("a volume through a link out of the node's directory: %v", err)
	}
	// A link that stays inside is refused too: the Engine resolves it on
	// the host at each start.
	os.Remove(filepath.Join(dir, "data", "root"))
	if err := os.Symlink("../etc", filepath.Join(dir, "data", "in")); err != nil {
		t.Fatal(err)
	}
	if err := prepareVolumes(dir, []string{"/data/in"}); err == nil {
		t.Fatal("a volume through a link inside the node's directory was taken")
	}
}

func TestANewNodeGetsAnInterfacesFileThatConfiguresNothingAndKeepsTheUsers(t *testing.T) {
	dir := t.TempDir()
	if err := writeInterfaces(dir, 2); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, InterfacesFile))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if line != "" && !strings.HasPrefix(line, "#") {
			t.Fatalf("a line that configures something: %q", line)
		}
	}
	if !strings.Contains(string(data), "#iface eth1 inet static") {
		t.Fatalf("no example for eth1:\n%s", data)
	}
	mine := []byte("auto eth0\niface eth0 inet dhcp\n")
	os.WriteFile(filepath.Join(dir, InterfacesFile), mine, 0o644)
	if err := writeInterfaces(dir, 2); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, InterfacesFile)); string(got) != string(mine) {
		t.Fatalf("the user's file was replaced: %q", got)
	}
}
