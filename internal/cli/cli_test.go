package cli

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

type opts struct {
	Name  string        `name:"name" env:"CLI_TEST_NAME" default:"${name}"`
	Count int           `name:"count" env:"CLI_TEST_COUNT" default:"3"`
	On    bool          `name:"on" env:"CLI_TEST_ON" default:"true" negatable:""`
	Wait  time.Duration `name:"wait" env:"CLI_TEST_WAIT" default:"5s"`
}

func parseOpts(t *testing.T, args ...string) (opts, error) {
	t.Helper()
	var o opts
	err := Parse("test", "", &o, map[string]string{"name": "computed"}, io.Discard, args)
	return o, err
}

func TestAFlagWinsOverItsVariableAndAVariableOverTheDefault(t *testing.T) {
	o, err := parseOpts(t)
	if err != nil || o != (opts{Name: "computed", Count: 3, On: true, Wait: 5 * time.Second}) {
		t.Fatalf("defaults: %+v, %v", o, err)
	}
	t.Setenv("CLI_TEST_COUNT", "7")
	t.Setenv("CLI_TEST_NAME", "env")
	if o, err = parseOpts(t); err != nil || o.Count != 7 || o.Name != "env" {
		t.Fatalf("variables: %+v, %v", o, err)
	}
	if o, err = parseOpts(t, "--count", "9", "--name=flag"); err != nil || o.Count != 9 || o.Name != "flag" {
		t.Fatalf("flags over variables: %+v, %v", o, err)
	}
}

func TestABooleanVariableTakesEveryUsualSpelling(t *testing.T) {
	for value, want := range map[string]bool{"0": false, "false": false, "no": false, "FALSE": false, "1": true, "true": true, "yes": true} {
		t.Setenv("CLI_TEST_ON", value)
		o, err := parseOpts(t)
		if err != nil || o.On != want {
			t.Errorf("CLI_TEST_ON=%s: on=%v, %v; want %v", value, o.On, err, want)
		}
	}
	t.Setenv("CLI_TEST_ON", "1")
	for _, args := range [][]string{{"--on=false"}, {"--no-on"}} {
		if o, err := parseOpts(t, args...); err != nil || o.On {
			t.Errorf("%v over CLI_TEST_ON=1: on=%v, %v", args, o.On, err)
		}
	}
}

func TestABadVariableIsAUsageErrorThatNamesIt(t *testing.T) {
	for env, value := range map[string]string{"CLI_TEST_COUNT": "lots", "CLI_TEST_ON": "maybe", "CLI_TEST_WAIT": "5"} {
		t.Run(env, func(t *testing.T) {
			t.Setenv(env, value)
			_, err := parseOpts(t)
			if _, ok := errors.AsType[*UsageError](err); !ok {
				t.Fatalf("%s=%s: %v, want a usage error", env, value, err)
			}
			if !strings.Contains(err.Error(), env) {
				t.Errorf("the error does not name %s: %v", env, err)
			}
		})
	}
}

func TestABadVariableThatAFlagOverridesIsNoError(t *testing.T) {
	t.Setenv("CLI_TEST_COUNT", "lots")
	t.Setenv("CLI_TEST_ON", "maybe")
	o, err := parseOpts(t, "--count", "4", "--on=false")
	if err != nil || o.Count != 4 || o.On {
		t.Fatalf("%+v, %v", o, err)
	}
}

func TestAnEmptyVariableCountsAsUnset(t *testing.T) {
	t.Setenv("CLI_TEST_COUNT", "")
	t.Setenv("CLI_TEST_NAME", "")
	o, err := parseOpts(t)
	if err != nil || o.Count != 3 || o.Name != "computed" {
		t.Fatalf("%+v, %v", o, err)
	}
}

func TestABadFlagIsAUsageErrorAndHelpIsNot(t *testing.T) {
	if _, err := parseOpts(t, "--count", "x"); err == nil {
		t.Error("--count x parsed")
	} else if _, ok := errors.AsType[*UsageError](err); !ok {
		t.Errorf("--count x: %v, want a usage error", err)
	}
	if _, err := parseOpts(t, "--nope"); err == nil {
		t.Error("--nope parsed")
	}
	if _, err := parseOpts(t, "extra"); err == nil {
		t.Error("a stray argument parsed")
	}
	if _, err := parseOpts(t, "--help"); !errors.Is(err, ErrHelp) {
		t.Errorf("--help: %v", err)
	}
}

// TestAUsageErrorExitsWithCode2 runs Exit in a child process (this test
// binary again), since Exit ends its process.
func TestAUsageErrorExitsWithCode2(t *testing.T) {
	if os.Getenv("CLI_TEST_CHILD") == "1" {
		var o opts
		Exit("child", Parse("child", "", &o, map[string]string{"name": "x"}, io.Discard, nil))
		os.Exit(0)
	}
	for value, want := range map[string]int{"lots": ExitUsage, "4": 0} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestAUsageErrorExitsWithCode2$")
		cmd.Env = append(os.Environ(), "CLI_TEST_CHILD=1", "CLI_TEST_COUNT="+value)
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := errors.AsType[*exec.ExitError](err); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != want {
			t.Errorf("CLI_TEST_COUNT=%s: exit code %d, want %d:\n%s", value, code, want, out)
		}
		if want != 0 && !strings.Contains(string(out), `CLI_TEST_COUNT="lots"`) {
			t.Errorf("the message does not say which variable is bad:\n%s", out)
		}
	}
}
