package captures

// File name extensions of the two capture formats.
const (
	ExtPcap   = ".pcap"
	ExtPcapng = ".pcapng"
)

// ValidFileName reports whether name is a plain file name that stays in the
// directory it is joined to: not empty, at most 255 bytes, no path
// separator, not starting with a dot, and made of [0-9A-Za-z_.-] only.
// Agents check names with it even though the controller sanitised them.
func ValidFileName(name string) bool {
	if name == "" || len(name) > 255 || name[0] == '.' {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}
