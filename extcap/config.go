package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Where the extcap finds its server. Wireshark runs an extcap's
// --extcap-interfaces without any of the options its dialog stores (those
// go only with --capture of one interface), so the list of links comes
// from, in this order: the --server option when one is given (with
// --user, --password), the environment (LABTAP_URL, LABTAP_USER,
// LABTAP_PASSWORD; a wireshark that `labtap-extcap --open` starts gets
// them so), or the configuration file, ~/.config/labtap/extcap.json on
// Linux (os.UserConfigDir), which may name several servers:
//
//	{"servers": [{"url": "http://127.0.0.1:3080", "user": "admin", "password": "..."}]}
//
// A capture takes the options Wireshark's dialog stores for the interface
// first: a user or password left empty there comes from the environment or
// from the file's entry for the same URL.

// configName is the configuration file's path under os.UserConfigDir.
const configName = "labtap/extcap.json"

// Bounds of the configuration file.
const (
	maxConfigBytes = 64 << 10
	maxServers     = 16
)

// options are the extcap's own arguments, the fields of Wireshark's
// dialog for an interface.
type options struct {
	Server, User, Password, CASHA256 string
}

// configPath returns the configuration file's path ("" when the system
// names no configuration directory).
func configPath() string {
	dir, err := os.UserConfigDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, filepath.FromSlash(configName))
}

// readConfig reads the configuration file's servers; a missing file is
// none.
func readConfig(path string) ([]server, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxConfigBytes {
		return nil, fmt.Errorf("%s: over %d bytes", path, maxConfigBytes)
	}
	var cfg struct {
		Servers []server `json:"servers"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if len(cfg.Servers) > maxServers {
		return nil, fmt.Errorf("%s: more than %d servers", path, maxServers)
	}
	for _, s := range cfg.Servers {
		if _, err := checkServerURL(s.URL); err != nil {
			return nil, fmt.Errorf("%s: %v", path, err)
		}
	}
	return cfg.Servers, nil
}

// sameURL reports whether two server URLs name the same server.
func sameURL(a, b string) bool {
	return strings.TrimRight(a, "/") == strings.TrimRight(b, "/")
}

// resolveServers returns the servers to list or capture from, by the
// order above; getenv is os.Getenv but for tests.
func resolveServers(o options, getenv func(string) string, file []server) []server {
	fill := func(s server) server {
		if s.CASHA256 == "" {
			s.CASHA256 = caFor(s.URL, getenv, file)
		}
		if s.User != "" || s.Password != "" {
			return s
		}
		if getenv("LABTAP_URL") != "" && sameURL(getenv("LABTAP_URL"), s.URL) && (getenv("LABTAP_USER") != "" || getenv("LABTAP_PASSWORD") != "") {
			s.User, s.Password = getenv("LABTAP_USER"), getenv("LABTAP_PASSWORD")
			return s
		}
		for _, f := range file {
			if sameURL(f.URL, s.URL) {
				s.User, s.Password = f.User, f.Password
				return s
			}
		}
		return s
	}
	switch {
	case o.Server != "":
		return []server{fill(server{URL: o.Server, User: o.User, Password: o.Password, CASHA256: o.CASHA256})}
	case getenv("LABTAP_URL") != "":
		return []server{fill(server{URL: getenv("LABTAP_URL"), User: getenv("LABTAP_USER"), Password: getenv("LABTAP_PASSWORD")})}
	}
	return file
}

// caFor is the CA fingerprint for a server URL: LABTAP_CA_SHA256 for
// LABTAP_URL's server, else the file's entry for that URL.
func caFor(u string, getenv func(string) string, file []server) string {
	if getenv("LABTAP_CA_SHA256") != "" && sameURL(getenv("LABTAP_URL"), u) {
		return getenv("LABTAP_CA_SHA256")
	}
	for _, f := range file {
		if sameURL(f.URL, u) {
			return f.CASHA256
		}
	}
	return ""
}
