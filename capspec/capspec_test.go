package capspec

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestValidFileName(t *testing.T) {
	for _, ok := range []string{"a.pcap", "PC1_0-0_to_PC2_0-0.pcap", "x"} {
		if !ValidFileName(ok) {
			t.Errorf("ValidFileName(%q) = false, want true", ok)
		}
	}
	for _, bad := range []string{"", ".", "..", ".hidden.pcap", "a/b.pcap", `a\b.pcap`, "../x.pcap", "/abs.pcap", "a b.pcap", "a\x00.pcap", strings.Repeat("a", 256)} {
		if ValidFileName(bad) {
			t.Errorf("ValidFileName(%q) = true, want false", bad)
		}
	}
}

func TestCleanFileNameKeepsTheNameInTheFolder(t *testing.T) {
	tests := []struct {
		name, in, format, want string
	}{
		{"a path loses its separators and dots", "../../etc/x.pcap", FormatPcap, "etcx.pcap"},
		{"the extension follows the format", "trace.pcap", FormatPcapng, "trace.pcapng"},
		{"an extension in any case is set aside once", "T.PCAPNG", FormatPcap, "T.pcap"},
		{"a long name is cut to fit with a ring number", strings.Repeat("a", 400), FormatPcapng, strings.Repeat("a", maxStem) + ".pcapng"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := CleanFileName(tt.in, tt.format)
			if err != nil || got != tt.want {
				t.Fatalf("CleanFileName(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
			if !ValidFileName(RingName(got, MaxRingFiles)) {
				t.Fatalf("the ring's names of %q are not valid", got)
			}
		})
	}
	if _, err := CleanFileName("../..", FormatPcap); err == nil {
		t.Fatal("a name with nothing usable was accepted")
	}
}

func TestRingNameNumbersBeforeTheExtension(t *testing.T) {
	if got := RingName("x.pcap", 1); got != "x-00001.pcap" {
		t.Errorf("RingName = %q", got)
	}
	if got := RingName("x.pcapng", 42); got != "x-00042.pcapng" {
		t.Errorf("RingName = %q", got)
	}
}

func TestIsRingNameKnowsARingsFilesOnly(t *testing.T) {
	for _, n := range []int{1, 42, MaxRingFiles} {
		for _, base := range []string{"x.pcap", "x.pcapng", "a-2.pcap"} {
			if !IsRingName(RingName(base, n), base) {
				t.Errorf("IsRingName(%q, %q) = false", RingName(base, n), base)
			}
		}
	}
	for _, name := range []string{"x.pcap", "x-1.pcap", "x-2.pcap", "x-0000a.pcap", "x-00001.pcapng", "y-00001.pcap", "x-00001-00001.pcap"} {
		if IsRingName(name, "x.pcap") {
			t.Errorf("IsRingName(%q, x.pcap) = true", name)
		}
	}
}

func TestCheckRefusesWhatNoCaptureCanDo(t *testing.T) {
	tests := []struct {
		name string
		spec Spec
		ok   bool
	}{
		{"the defaults", Spec{FileName: "a.pcap"}, true},
		{"every extension", Spec{FileName: "a.pcapng", Format: FormatPcapng, Filter: "icmp", MaxBytes: MinMaxBytes, MaxSeconds: 60, RingFiles: 3}, true},
		{"an unknown data link type", Spec{FileName: "a.pcap", DataLinkType: "DLT_RAW"}, false},
		{"an unknown format", Spec{FileName: "a.erf", Format: "erf"}, false},
		{"a name of the other format", Spec{FileName: "a.pcap", Format: FormatPcapng}, false},
		{"a name that leaves the folder", Spec{FileName: "../a.pcap"}, false},
		{"a hidden name", Spec{FileName: ".a.pcap"}, false},
		{"a filter too long", Spec{FileName: "a.pcap", Filter: strings.Repeat("x", MaxFilterLen+1)}, false},
		{"files too small for a full-size frame", Spec{FileName: "a.pcap", MaxBytes: MinMaxBytes - 1}, false},
		{"a negative time", Spec{FileName: "a.pcap", MaxSeconds: -1}, false},
		{"a packet limit", Spec{FileName: "a.pcap", MaxPackets: 1000, RingFiles: 2}, true},
		{"a negative packet limit", Spec{FileName: "a.pcap", MaxPackets: -1}, false},
		{"a packet limit too large", Spec{FileName: "a.pcap", MaxPackets: MaxMaxPackets + 1}, false},
		{"a ring without a limit", Spec{FileName: "a.pcap", RingFiles: 2}, false},
		{"too many files", Spec{FileName: "a.pcap", MaxBytes: MinMaxBytes, RingFiles: MaxRingFiles + 1}, false},
		{"a project budget", Spec{FileName: "a.pcap", ProjectBudget: MaxProjectBudget}, true},
		{"a negative project budget", Spec{FileName: "a.pcap", ProjectBudget: -1}, false},
		{"a project budget over its bound", Spec{FileName: "a.pcap", ProjectBudget: MaxProjectBudget + 1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.spec.Check(true); (err == nil) != tt.ok {
				t.Fatalf("Check(%+v) = %v, want ok %v", tt.spec, err, tt.ok)
			}
		})
	}
}

// safeName is what every capture file name must look like.
var safeName = regexp.MustCompile(`^[0-9A-Za-z_-]+\.pcap$`)

func TestCleanFileName(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"gui proposal kept", "PC1_Ethernet0_to_PC2_Ethernet0.pcap", "PC1_Ethernet0_to_PC2_Ethernet0.pcap"},
		{"extension added", "mycap", "mycap.pcap"},
		{"extension case-insensitive", "mycap.PCAP", "mycap.pcap"},
		{"pcapng extension replaced", "x.pcapng", "x.pcap"},
		{"parent traversal removed", "../../etc/passwd", "etcpasswd.pcap"},
		{"absolute path flattened", "/tmp/evil.pcap", "tmpevil.pcap"},
		{"backslashes removed", `..\..\win.pcap`, "win.pcap"},
		{"encoded traversal is just text", "%2e%2e%2fx", "2e2e2fx.pcap"},
		{"dots in stem removed", "a.b.c.pcap", "abc.pcap"},
		{"spaces and unicode removed", "café capture", "cafcapture.pcap"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := CleanFileName(tt.in, FormatPcap)
			if err != nil || got != tt.want {
				t.Fatalf("CleanFileName(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
			if !safeName.MatchString(got) || filepath.Base(got) != got {
				t.Fatalf("%q is not a plain safe name", got)
			}
		})
	}
	for _, in := range []string{"", "..", ".pcap", "../", "/", `\`, "@@@.pcap"} {
		if got, err := CleanFileName(in, FormatPcap); err == nil {
			t.Errorf("CleanFileName(%q) = %q, %v; want an error", in, got, err)
		}
	}
	if got, _ := CleanFileName(strings.Repeat("a", 400), FormatPcap); len(got) > 255 {
		t.Errorf("a 400-byte name gave a %d-byte name", len(got))
	}
}
