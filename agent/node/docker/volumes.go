package docker

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// InterfacesFile is the node file the GUI's "Edit network configuration"
// reads and writes: the container's /etc/network/interfaces, kept in the
// node's /etc/network volume, which the init brings up with ifup at each
// start where the image has ifup.
const InterfacesFile = "etc/network/interfaces"

// writeInterfaces gives a new node an /etc/network/interfaces that
// configures nothing, with an example per adapter to uncomment, and the
// ifupdown hook directories, as GNS3 does; a file that is there already
// (the node was made before, or the user wrote it) is kept.
func writeInterfaces(dir string, adapters int) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	for _, d := range []string{"if-up.d", "if-down.d", "if-pre-up.d", "if-post-down.d", "interfaces.d"} {
		if err := root.MkdirAll("etc/network/"+d, 0o755); err != nil {
			return err
		}
	}
	var b strings.Builder
	b.WriteString("# The network configuration of this node, brought up with `ifup -a` at\n" +
		"# each start where the image has ifup. Uncomment and adapt what you need.\n" +
		"#\n# source /etc/network/interfaces.d/*\n")
	for i := range adapters {
		fmt.Fprintf(&b, "\n# eth%[1]d with a fixed address:\n#auto eth%[1]d\n#iface eth%[1]d inet static\n"+
			"#\taddress 192.168.%[1]d.2/24\n#\tgateway 192.168.%[1]d.1\n"+
			"#\n# eth%[1]d by DHCP:\n#auto eth%[1]d\n#iface eth%[1]d inet dhcp\n", i)
	}
	f, err := root.OpenFile(InterfacesFile, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, err := f.WriteString(b.String()); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
