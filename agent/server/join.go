package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/labtap/labtap/internal/atomicfile"
	"github.com/labtap/labtap/internal/pki"
)

// Files of a joined agent, in its data directory's tls/.
const (
	agentTLSDir  = "tls"
	agentCert    = "agent.crt"
	agentKey     = "agent.key"
	agentCA      = "ca.crt"
	joinEndpoint = "/v3/computes/join"
)

// Join is how an agent joins a controller started with --tls auto: a
// one-time token an admin made, and the SHA-256 fingerprint of the
// controller's CA, which the agent checks before it sends anything.
type Join struct {
	Controller string // https://host:port
	Token      string
	CASHA256   string
	ComputeID  string
	Name       string
	// Host and Port are where the controller reaches this agent: its
	// certificate is issued for Host.
	Host string
	Port int
	// DataDir is the agent's: the key and certificates go in its tls/.
	DataDir string
	Logger  *slog.Logger
}

// AgentTLS is a joined agent's TLS: its certificate, and the controller's
// CA, whose controller certificate alone may call it.
type AgentTLS struct {
	CertFile, KeyFile, CAFile string
}

// JoinedTLS returns the TLS files an agent kept from an earlier join in
// dataDir, if it has them.
func JoinedTLS(dataDir string) (AgentTLS, bool) {
	dir := filepath.Join(dataDir, agentTLSDir)
	t := AgentTLS{CertFile: filepath.Join(dir, agentCert), KeyFile: filepath.Join(dir, agentKey), CAFile: filepath.Join(dir, agentCA)}
	for _, f := range []string{t.CertFile, t.KeyFile, t.CAFile} {
		if _, err := os.Stat(f); err != nil {
			return AgentTLS{}, false
		}
	}
	return t, true
}

// ServerTLS is the agent API's TLS configuration: the agent's certificate
// (read again when its file changes), mutual TLS with calls taken from the
// controller's certificate only.
func (t AgentTLS) ServerTLS() (*tls.Config, error) {
	r, err := pki.NewReloader(t.CertFile, t.KeyFile)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(t.CAFile)
	if err != nil {
		return nil, err
	}
	cas, err := pki.ParseCerts(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", t.CAFile, err)
	}
	return pki.MutualServerConfig(r, cas[0], pki.ControllerName), nil
}

// refusedJoin is a join the controller refused: trying again will not
// help.
type refusedJoin struct{ msg string }

func (e refusedJoin) Error() string { return e.msg }

// JoinController joins the controller: it makes a key, sends a
// certificate request with the token over TLS to the controller whose CA
// has the pinned fingerprint, and keeps the certificate it gets (files
// 0600). A controller that cannot be reached is tried again with backoff
// until ctx ends; a refusal, or a certificate that does not match the
// fingerprint, ends the join at once.
func JoinController(ctx context.Context, j Join) (AgentTLS, error) {
	log := j.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	pin, err := pki.ParseFingerprint(j.CASHA256)
	if err != nil {
		return AgentTLS{}, fmt.Errorf("--ca-sha256: %w", err)
	}
	u, err := url.Parse(j.Controller)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return AgentTLS{}, fmt.Errorf("--join %q: want https://host:port (the controller's --tls auto address)", j.Controller)
	}
	keyPEM, csrPEM, err := pki.NewKeyAndCSR(j.ComputeID)
	if err != nil {
		return AgentTLS{}, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = pki.PinnedClientConfig(pin, u.Hostname())
	client := &http.Client{Timeout: 30 * time.Second, Transport: tr}
	defer tr.CloseIdleConnections()
	body, _ := json.Marshal(map[string]any{"token": j.Token, "csr": string(csrPEM), "compute_id": j.ComputeID,
		"name": j.Name, "host": j.Host, "port": j.Port})
	endpoint := strings.TrimSuffix(u.String(), "/") + joinEndpoint
	wait := &backoff.ExponentialBackOff{InitialInterval: 250 * time.Millisecond, MaxInterval: 10 * time.Second,
		Multiplier: 2, RandomizationFactor: 0.5}
	wait.Reset()
	var reply struct {
		Certificate string `json:"certificate"`
		CA          string `json:"ca"`
		Message     string `json:"message"`
	}
	for {
		err := joinOnce(ctx, client, endpoint, body, &reply)
		if err == nil {
			break
		}
		if _, final := errors.AsType[refusedJoin](err); final {
			return AgentTLS{}, err
		}
		if _, bad := errors.AsType[*tls.CertificateVerificationError](err); bad || strings.Contains(err.Error(), "no CA of SHA-256") {
			return AgentTLS{}, fmt.Errorf("join %s: %w", j.Controller, err)
		}
		in := wait.NextBackOff()
		log.Warn("join the controller: will retry", "controller", endpoint, "err", err, "in", in)
		select {
		case <-ctx.Done():
			return AgentTLS{}, ctx.Err()
		case <-time.After(in):
		}
	}
	// The CA the reply names must be the pinned one.
	cas, err := pki.ParseCerts([]byte(reply.CA))
	if err != nil || !pki.MatchesFingerprint(cas[0], pin) {
		return AgentTLS{}, errors.New("the controller's reply names another CA than --ca-sha256")
	}
	if _, err := pki.ParseCerts([]byte(reply.Certificate)); err != nil {
		return AgentTLS{}, fmt.Errorf("the controller's reply: %w", err)
	}
	dir := filepath.Join(j.DataDir, agentTLSDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return AgentTLS{}, err
	}
	t := AgentTLS{CertFile: filepath.Join(dir, agentCert), KeyFile: filepath.Join(dir, agentKey), CAFile: filepath.Join(dir, agentCA)}
	for _, f := range []struct {
		path string
		data []byte
	}{{t.KeyFile, keyPEM}, {t.CAFile, []byte(reply.CA)}, {t.CertFile, []byte(reply.Certificate)}} { // the certificate last: JoinedTLS needs all three
		if err := atomicfile.Write(f.path, f.data, 0o600); err != nil {
			return AgentTLS{}, err
		}
	}
	log.Info("joined the controller", "controller", j.Controller, "compute_id", j.ComputeID, "cert_file", t.CertFile)
	return t, nil
}

func joinOnce(ctx context.Context, client *http.Client, endpoint string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusCreated {
		var e struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(data, &e)
		msg := fmt.Sprintf("join refused: %s: %s", resp.Status, e.Message)
		if resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != http.StatusRequestTimeout && resp.StatusCode != http.StatusTooManyRequests {
			return refusedJoin{msg}
		}
		return errors.New(msg)
	}
	return json.Unmarshal(data, out)
}
