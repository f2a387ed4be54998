package compute

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/labtap/labtap/controller/project"
	"github.com/labtap/labtap/internal/pki"
)

func enrolled(t *testing.T) (*Registry, *Enrollment, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tls")
	ca, err := pki.LoadOrCreateCA(dir, "test CA")
	if err != nil {
		t.Fatal(err)
	}
	e, err := NewEnrollment(ca, dir)
	if err != nil {
		t.Fatal(err)
	}
	r := NewRegistry(RegistryConfig{Path: filepath.Join(t.TempDir(), "computes.json"),
		Client: NewClient(ClientConfig{Retries: 0, Timeout: time.Second})})
	r.SetEnrollment(e)
	return r, e, dir
}

func joinRequest(t *testing.T, token, id string) JoinRequest {
	t.Helper()
	_, csr, err := pki.NewKeyAndCSR(id)
	if err != nil {
		t.Fatal(err)
	}
	return JoinRequest{Token: token, CSR: string(csr), ComputeID: id, Host: "127.0.0.2", Port: 3081}
}

func TestAJoinTokenIsSpentOnceAndOnlyByAWholeRequest(t *testing.T) {
	r, e, _ := enrolled(t)
	tok, err := e.NewToken(0)
	if err != nil {
		t.Fatal(err)
	}
	// Bad requests spend nothing and register nothing.
	bad := []JoinRequest{
		{Token: tok.Token, CSR: "not a csr", ComputeID: "a1", Host: "127.0.0.2", Port: 3081},
		{Token: tok.Token, CSR: joinRequest(t, "", "x").CSR, ComputeID: "a1", Host: "127.0.0.2", Port: 0},
		{Token: tok.Token, CSR: joinRequest(t, "", "x").CSR, ComputeID: "local", Host: "127.0.0.2", Port: 3081},
		{Token: tok.Token, CSR: strings.Repeat("x", maxCSRLen+1), ComputeID: "a1", Host: "127.0.0.2", Port: 3081},
		{Token: strings.Repeat("t", maxTokenLen+1), CSR: joinRequest(t, "", "x").CSR, ComputeID: "a1", Host: "127.0.0.2", Port: 3081},
	}
	for i, req := range bad {
		if _, err := e.Join(t.Context(), req); !errors.Is(err, project.ErrInvalid) {
			t.Errorf("bad request %d: %v, want invalid", i, err)
		}
	}
	if n := len(r.List()); n != 0 {
		t.Fatalf("%d computes after bad requests", n)
	}
	reply, err := e.Join(t.Context(), joinRequest(t, tok.Token, "a1"))
	if err != nil {
		t.Fatalf("the token did not survive the bad requests: %v", err)
	}
	certs, err := pki.ParseCerts([]byte(reply.Certificate))
	if err != nil || certs[0].Subject.CommonName != "a1" || certs[0].VerifyHostname("127.0.0.2") != nil {
		t.Fatalf("issued %v, %v", certs, err)
	}
	c, ok := r.Get("a1")
	if !ok || c.Protocol != "https" || c.URL != "https://127.0.0.2:3081" || c.CertSerial != certs[0].SerialNumber.String() {
		t.Fatalf("registered %+v", c)
	}
	// Replayed, for another compute: refused, nothing registered.
	if _, err := e.Join(t.Context(), joinRequest(t, tok.Token, "a2")); !errors.Is(err, project.ErrForbidden) || !strings.Contains(err.Error(), "already used") {
		t.Errorf("replay: %v", err)
	}
	if _, ok := r.Get("a2"); ok {
		t.Error("a replayed token registered a compute")
	}
}

func TestAnExpiredJoinTokenIsRefused(t *testing.T) {
	r, e, _ := enrolled(t)
	now := time.Now()
	e.now = func() time.Time { return now }
	tok, err := e.NewToken(time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Minute)
	if _, err := e.Join(t.Context(), joinRequest(t, tok.Token, "a1")); !errors.Is(err, project.ErrForbidden) || !strings.Contains(err.Error(), "Expired") {
		t.Errorf("expired token: %v", err)
	}
	if len(r.List()) != 0 {
		t.Error("an expired token registered a compute")
	}
	for _, ttl := range []time.Duration{-time.Second, time.Millisecond, MaxJoinTokenTTL + time.Second} {
		if _, err := e.NewToken(ttl); !errors.Is(err, project.ErrInvalid) {
			t.Errorf("ttl %v: %v", ttl, err)
		}
	}
}

func TestRemovingAJoinedComputeRevokesItsCertificateForGood(t *testing.T) {
	r, e, dir := enrolled(t)
	tok, _ := e.NewToken(0)
	if _, err := e.Join(t.Context(), joinRequest(t, tok.Token, "a1")); err != nil {
		t.Fatal(err)
	}
	c, _ := r.Get("a1")
	if e.Revoked(c.CertSerial) {
		t.Fatal("revoked at join")
	}
	if err := r.Remove("a1"); err != nil {
		t.Fatal(err)
	}
	if !e.Revoked(c.CertSerial) {
		t.Error("removed, not revoked")
	}
	// Kept on disk: a restarted controller still refuses it.
	ca, _ := pki.LoadOrCreateCA(dir, "")
	again, err := NewEnrollment(ca, dir)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Revoked(c.CertSerial) {
		t.Error("the revocation did not survive a restart")
	}
}
