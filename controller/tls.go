package main

import (
	"crypto/tls"
	"log/slog"
	"net"
	"path/filepath"

	"github.com/labtap/labtap/controller/compute"
	"github.com/labtap/labtap/internal/cli"
	"github.com/labtap/labtap/internal/pki"
)

// tlsDir is where --tls auto keeps its CA and certificates, in the data
// directory.
const tlsDir = "tls"

// serveTLS returns the API's TLS configuration, or nil when TLS is off.
// With --tls auto it makes (on first start) a private CA and a server
// certificate for the names the controller listens and is advertised at.
// Either way it logs the served certificate's SHA-256 fingerprint, for
// users to compare with what their client shows.
// The CA is returned too with --tls auto (nil otherwise): agents join
// with it.
func serveTLS(o options, listenHost string, log *slog.Logger) (*tls.Config, *pki.CA, error) {
	certFile, keyFile := o.TLSCert, o.TLSKey
	var ca *pki.CA
	switch {
	case o.TLS == "auto":
		var err error
		ca, err = pki.LoadOrCreateCA(filepath.Join(o.DataDir, tlsDir), "labtap controller CA ("+hostname()+")")
		if err != nil {
			return nil, nil, cli.FlagError("tls", "LABTAP_TLS", err)
		}
		if certFile, keyFile, err = ca.EnsureServerCert(serverNames(o, listenHost)); err != nil {
			return nil, nil, cli.FlagError("tls", "LABTAP_TLS", err)
		}
		log.Info("TLS certificate authority: agents join with --ca-sha256 of it", "ca_sha256", pki.Fingerprint(ca.Cert), "ca_file", filepath.Join(o.DataDir, tlsDir, pki.CACertFile))
	case certFile == "":
		return nil, nil, nil
	}
	r, err := pki.NewReloader(certFile, keyFile)
	if err != nil {
		return nil, nil, cli.FlagError("tls-cert", "LABTAP_TLS_CERT", err)
	}
	leaf := r.Certificate().Leaf
	log.Info("TLS on: HTTPS only, plain HTTP refused", "certificate_sha256", pki.Fingerprint(leaf),
		"subject", leaf.Subject.CommonName, "not_after", leaf.NotAfter, "cert_file", certFile)
	return pki.ServerConfig(r), ca, nil
}

// enrollment lets agents join with the CA of --tls auto (nil: none) and
// gives the TLS configuration of calls to agents: mutual TLS, with the
// controller's own client certificate.
func enrollment(ca *pki.CA, o options) (*compute.Enrollment, *tls.Config, error) {
	if ca == nil {
		return nil, nil, nil
	}
	e, err := compute.NewEnrollment(ca, filepath.Join(o.DataDir, tlsDir))
	if err != nil {
		return nil, nil, err
	}
	certFile, keyFile, err := ca.EnsureClientCert()
	if err != nil {
		return nil, nil, err
	}
	r, err := pki.NewReloader(certFile, keyFile)
	if err != nil {
		return nil, nil, err
	}
	return e, e.ClientTLS(r), nil
}

// serverNames are the names and addresses a --tls auto certificate is
// for: loopback, this host's name, the listen address (every address of
// this host's interfaces when it is a wildcard) and --advertise and
// --console-host.
func serverNames(o options, listenHost string) pki.Names {
	var n pki.Names
	for _, h := range []string{"localhost", "127.0.0.1", "::1", hostname(), listenHost, o.Advertise, o.ConsoleHost} {
		n.Add(h)
	}
	if ip := net.ParseIP(listenHost); ip != nil && ip.IsUnspecified() {
		if addrs, err := net.InterfaceAddrs(); err == nil {
			for _, a := range addrs {
				if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLinkLocalUnicast() {
					n.Add(ipn.IP.String())
				}
			}
		}
	}
	return n
}
