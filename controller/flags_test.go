package main

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/labtap/labtap/internal/cli"
)

func TestTheREADMEsControllerFlagsAreTheFlags(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
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
