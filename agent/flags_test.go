package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/labtap/labtap/agent/bridge"
	"github.com/labtap/labtap/internal/cli"
)

func TestTheDocsAgentFlagsAreTheFlags(t *testing.T) {
	readme, err := os.ReadFile("../docs/operating.md")
	if err != nil {
		t.Fatal(err)
	}
	problems, err := cli.CheckReadme(string(readme), "Agent (`bin/agent`)", &options{},
		map[string]string{"data_dir": "", "hostname": "", "socket_buffer": strconv.Itoa(bridge.DefaultBufferBytes)})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

func TestAgentFlagsAndVariables(t *testing.T) {
	t.Run("LABTAP_UDP_GRO=0 turns GRO off", func(t *testing.T) {
		for _, v := range []string{"0", "false", "no"} {
			t.Setenv("LABTAP_UDP_GRO", v)
			t.Setenv("LABTAP_CAPTURE_DIRECT_IO", v)
			o, err := parse(nil)
			if err != nil || o.UDPGRO || o.CaptureDirectIO {
				t.Errorf("LABTAP_UDP_GRO=%s LABTAP_CAPTURE_DIRECT_IO=%[1]s: %+v, %v", v, o, err)
			}
		}
	})
	t.Run("an invalid LABTAP_SOCKET_BUFFER is a usage error that names it", func(t *testing.T) {
		for _, v := range []string{"4M", "-1", "0"} {
			t.Setenv("LABTAP_SOCKET_BUFFER", v)
			_, err := parse(nil)
			if _, ok := errors.AsType[*cli.UsageError](err); !ok {
				t.Errorf("LABTAP_SOCKET_BUFFER=%s: %v, want a usage error", v, err)
			} else if !strings.Contains(err.Error(), "socket-buffer") {
				t.Errorf("LABTAP_SOCKET_BUFFER=%s: the error names neither flag nor variable: %v", v, err)
			}
		}
	})
	t.Run("a flag overrides a bad variable", func(t *testing.T) {
		t.Setenv("LABTAP_SOCKET_BUFFER", "4M")
		t.Setenv("LABTAP_UDP_GRO", "perhaps")
		o, err := parse([]string{"--socket-buffer", "65536", "--udp-gro=false"})
		if err != nil || o.SocketBuffer != 65536 || o.UDPGRO {
			t.Fatalf("%+v, %v", o, err)
		}
	})
	t.Run("defaults", func(t *testing.T) {
		o, err := parse(nil)
		if err != nil || !o.UDPGRO || !o.CaptureDirectIO || o.SocketBuffer != bridge.DefaultBufferBytes || o.ComputeID != hostname() {
			t.Fatalf("%+v, %v", o, err)
		}
	})
}

// TestAgentVersionHelpAndFlagErrors: as the controller's.
func TestAgentVersionHelpAndFlagErrors(t *testing.T) {
	var out bytes.Buffer
	if _, err := parseTo(&out, []string{"--version"}); !errors.Is(err, cli.ErrHelp) || !strings.Contains(out.String(), version) {
		t.Fatalf("--version: %v, printed %q", err, out.String())
	}
	out.Reset()
	// Before the flags: the variable with no flag is described, not only
	// named in another flag's help.
	if _, err := parseTo(&out, []string{"--help"}); !errors.Is(err, cli.ErrHelp) || !strings.Contains(strings.Split(out.String(), "Flags:")[0], "LABTAP_SECRET") {
		t.Fatalf("--help: %v, and LABTAP_SECRET is not in it:\n%s", err, out.String())
	}
	_, err := parse([]string{"--listen", "nonsense"})
	if _, ok := errors.AsType[*cli.UsageError](err); !ok || !strings.Contains(err.Error(), "--listen") || !strings.Contains(err.Error(), "LABTAP_LISTEN") {
		t.Errorf("--listen nonsense: %v, want a usage error naming --listen and LABTAP_LISTEN", err)
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	err = run([]string{"--data-dir", filepath.Join(file, "sub"), "--listen", "127.0.0.1:0"})
	if _, ok := errors.AsType[*cli.UsageError](err); !ok || !strings.Contains(err.Error(), "--data-dir") || !strings.Contains(err.Error(), "LABTAP_DATA_DIR") {
		t.Errorf("--data-dir under a file: %v, want a usage error naming --data-dir and LABTAP_DATA_DIR", err)
	}
}
