package main

import (
	"bytes"
	"log/slog"
	"net"
	"strings"
	"testing"
)

// A controller without credentials warns when it listens beyond loopback,
// and only then (no address is bound here).
func TestAnOpenControllerBeyondLoopbackWarns(t *testing.T) {
	for _, c := range []struct {
		ip   string
		auth bool
		warn bool
	}{
		{"0.0.0.0", false, true},
		{"192.0.2.10", false, true},
		{"::", false, true},
		{"127.0.0.1", false, false},
		{"::1", false, false},
		{"0.0.0.0", true, false},
	} {
		var buf bytes.Buffer
		warnIfOpen(slog.New(slog.NewTextHandler(&buf, nil)), &net.TCPAddr{IP: net.ParseIP(c.ip), Port: 3080}, c.auth)
		if got := strings.Contains(buf.String(), "level=WARN") && strings.Contains(buf.String(), "open to anyone"); got != c.warn {
			t.Errorf("%s auth=%v: warned %v, want %v: %s", c.ip, c.auth, got, c.warn, buf.String())
		}
	}
}
