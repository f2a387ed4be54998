package main

import (
	"bytes"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/labtap/labtap/internal/cli"
)

func TestTheDocsControllerFlagsAreTheFlags(t *testing.T) {
	readme, err := os.ReadFile("../docs/operating.md")
	if err != nil {
		t.Fatal(err)
	}
	problems, err := cli.CheckReadme(string(readme), "Controller (`bin/controller`", &options{}, map[string]string{"data_dir": "", "gns3_version": defaultGNS3Version})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
}

func TestControllerFlagsAndVariables(t *testing.T) {
	t.Run("a bad variable is a usage error", func(t *testing.T) {
		for env, value := range map[string]string{"LABTAP_MAX_JSON_BODY": "1MB", "LABTAP_LOCAL_AGENT": "maybe", "LABTAP_AUTO_CLOSE_GRACE": "5", "LABTAP_LOG_LEVEL": "loud"} {
			t.Setenv(env, value)
			if _, err := parse(nil); !isUsage(err) {
				t.Errorf("%s=%s: %v, want a usage error", env, value, err)
			}
			os.Unsetenv(env)
		}
	})
	t.Run("a flag overrides a bad variable", func(t *testing.T) {
		t.Setenv("LABTAP_MAX_JSON_BODY", "1MB")
		t.Setenv("LABTAP_AUTO_CLOSE_GRACE", "5")
		o, err := parse([]string{"--max-json-body", "2048", "--auto-close-grace=1s"})
		if err != nil || o.MaxJSONBody != 2048 || o.AutoCloseGrace != time.Second {
			t.Fatalf("%+v, %v", o, err)
		}
	})
	t.Run("LABTAP_LOCAL_AGENT=0 turns the local agent off", func(t *testing.T) {
		t.Setenv("LABTAP_LOCAL_AGENT", "0")
		if o, err := parse(nil); err != nil || o.LocalAgent {
			t.Fatalf("%+v, %v", o, err)
		}
		if o, err := parse([]string{"--local-agent"}); err != nil || !o.LocalAgent {
			t.Fatalf("--local-agent over LABTAP_LOCAL_AGENT=0: %+v, %v", o, err)
		}
	})
	t.Run("the local agent's QEMU accelerator is auto, kvm or tcg", func(t *testing.T) {
		// scripts/test sets it where KVM opens but boots nothing.
		t.Setenv("LABTAP_QEMU_ACCEL", "")
		os.Unsetenv("LABTAP_QEMU_ACCEL")
		if o, err := parse(nil); err != nil || o.QemuAccel != "auto" {
			t.Fatalf("default: %+v, %v", o, err)
		}
		t.Setenv("LABTAP_QEMU_ACCEL", "tcg")
		if o, err := parse(nil); err != nil || o.QemuAccel != "tcg" {
			t.Fatalf("LABTAP_QEMU_ACCEL=tcg: %+v, %v", o, err)
		}
		if _, err := parse([]string{"--qemu-accel", "xen"}); !isUsage(err) {
			t.Fatalf("--qemu-accel xen: %v", err)
		}
	})
	t.Run("a body limit must be positive", func(t *testing.T) {
		if _, err := parse([]string{"--max-json-body", "0"}); !isUsage(err) {
			t.Fatalf("--max-json-body 0: %v", err)
		}
	})
}

func isUsage(err error) bool {
	_, ok := errors.AsType[*cli.UsageError](err)
	return ok
}

// The GNS3 version is pinned only when given by hand: by default a 2.2
// GUI is answered its own.
func TestTheGNS3VersionIsPinnedOnlyWhenGiven(t *testing.T) {
	t.Setenv("LABTAP_GNS3_VERSION", "")
	os.Unsetenv("LABTAP_GNS3_VERSION")
	if o, err := parse(nil); err != nil || o.pinVersion || o.GNS3Version != defaultGNS3Version {
		t.Fatalf("default: %+v %v", o, err)
	}
	for _, args := range [][]string{{"--gns3-version", "2.2.55"}, {"--gns3-version=2.2.55"}} {
		if o, err := parse(args); err != nil || !o.pinVersion || o.GNS3Version != "2.2.55" {
			t.Fatalf("%v: %+v %v", args, o, err)
		}
	}
	t.Setenv("LABTAP_GNS3_VERSION", "2.2.54")
	if o, err := parse(nil); err != nil || !o.pinVersion || o.GNS3Version != "2.2.54" {
		t.Fatalf("variable: %+v %v", o, err)
	}
	if _, err := parse([]string{"--console-ports", "5000-4000"}); !isUsage(err) {
		t.Fatalf("a reversed console range: %v", err)
	}
}

func TestAllowedOriginsFlag(t *testing.T) {
	t.Setenv("LABTAP_ALLOWED_ORIGINS", "https://webui.example,http://10.0.0.5:4200")
	o, err := parse(nil)
	if err != nil || len(o.AllowedOrigins) != 2 || o.AllowedOrigins[1] != "http://10.0.0.5:4200" {
		t.Fatalf("%q, %v", o.AllowedOrigins, err)
	}
	if o, err := parse([]string{"--allowed-origins", "http://a.example"}); err != nil || len(o.AllowedOrigins) != 1 {
		t.Fatalf("flag over variable: %q, %v", o.AllowedOrigins, err)
	}
	for _, bad := range []string{"webui.example", "ftp://webui.example", "https://webui.example/path", "null"} {
		t.Setenv("LABTAP_ALLOWED_ORIGINS", bad)
		if _, err := parse(nil); !isUsage(err) {
			t.Errorf("%q: %v, want a usage error", bad, err)
		}
	}
}

// TestControllerVersionHelpAndFlagErrors: --version prints the version,
// --help names LABTAP_SECRET (a variable with no flag), and a bad --listen
// or --data-dir is a usage error (exit 2) naming the flag and its variable.
func TestControllerVersionHelpAndFlagErrors(t *testing.T) {
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
	for _, listen := range []string{"nonsense", "127.0.0.1:99999", "127.0.0.1:http-alt-nope"} {
		_, err := parse([]string{"--listen", listen})
		if !isUsage(err) || !strings.Contains(err.Error(), "--listen") || !strings.Contains(err.Error(), "LABTAP_LISTEN") {
			t.Errorf("--listen %s: %v, want a usage error naming --listen and LABTAP_LISTEN", listen, err)
		}
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	err := run([]string{"--data-dir", filepath.Join(file, "sub"), "--listen", "127.0.0.1:0", "--no-local-agent"})
	if !isUsage(err) || !strings.Contains(err.Error(), "--data-dir") || !strings.Contains(err.Error(), "LABTAP_DATA_DIR") {
		t.Errorf("--data-dir under a file: %v, want a usage error naming --data-dir and LABTAP_DATA_DIR", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	err = run([]string{"--data-dir", t.TempDir(), "--listen", l.Addr().String(), "--no-local-agent"})
	if !isUsage(err) || !strings.Contains(err.Error(), "--listen") {
		t.Errorf("--listen on a port in use: %v, want a usage error naming --listen", err)
	}
}
