// Package compute is the controller's side of its agents: the registry of
// computes (GNS3's name for them), their health, and the HTTP client that
// speaks proto to them. Agents carries out project.Computes (the Registry
// keeps the computes), turning agent replies into project errors that keep
// the agent's message.
package compute

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/hashicorp/go-retryablehttp"
	"github.com/labtap/labtap/controller/project"
	"github.com/labtap/labtap/proto"
)

// Client calls agents, retrying with backoff only what is safe to send
// again (retryable): a call of an idempotent method (GET, PUT, DELETE,
// HEAD) that failed to connect or got 502, 503, 504 or 429, and a POST
// only when it never reached the agent (its connection was never made).
// Capture streams are not retried: they cannot be replayed.
type Client struct {
	idempotent *retryablehttp.Client // GET, PUT, DELETE, HEAD
	post       *retryablehttp.Client // any other method
	streams    *http.Client
	timeout    time.Duration
}

// ClientConfig configures a Client.
type ClientConfig struct {
	// Retries is how many times a failed call is sent again, when it is
	// safe to (see Client): 0 never (DefaultRetries is what the
	// controller uses).
	Retries int
	// RetryWait is the wait before the first retry, doubled before each
	// next one up to 20 times it (an agent's Retry-After aside); 0 means
	// 100 ms. Tests shorten it.
	RetryWait time.Duration
	// Timeout bounds one call, retries included; 0 means 60 s (starting a
	// node can take seconds).
	Timeout time.Duration
	// TLS, when set, is the TLS configuration of calls to https agents
	// (Enrollment.ClientTLS: mutual TLS with joined agents).
	TLS    *tls.Config
	Logger *slog.Logger
}

// DefaultRetries is how many times the controller sends a failed agent
// call again.
const DefaultRetries = 3

// NewClient returns a Client.
func NewClient(cfg ClientConfig) *Client {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 60 * time.Second
	}
	retries := max(cfg.Retries, 0)
	if cfg.RetryWait <= 0 {
		cfg.RetryWait = 100 * time.Millisecond
	}
	client := func(idempotent bool) *retryablehttp.Client {
		rc := retryablehttp.NewClient()
		rc.Logger = cfg.Logger.With("component", "agent_client") // *slog.Logger is a LeveledLogger
		rc.RetryMax = retries
		rc.RetryWaitMin = cfg.RetryWait
		rc.RetryWaitMax = 20 * cfg.RetryWait
		rc.ErrorHandler = retryablehttp.PassthroughErrorHandler // keep the agent's last reply
		rc.CheckRetry = func(ctx context.Context, resp *http.Response, err error) (bool, error) {
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			return retryable(idempotent, resp, err), nil
		}
		return rc
	}
	streams := http.DefaultTransport.(*http.Transport).Clone()
	c := &Client{idempotent: client(true), post: client(false), streams: &http.Client{Transport: streams}, timeout: cfg.Timeout}
	c.post.HTTPClient = c.idempotent.HTTPClient // one pool of connections
	if cfg.TLS != nil {
		streams.TLSClientConfig = cfg.TLS
		if t, ok := c.idempotent.HTTPClient.Transport.(*http.Transport); ok {
			t.TLSClientConfig = cfg.TLS
		}
	}
	return c
}

// closeIdle closes the connections kept open to agents: the next call
// makes a new one, checked again (after a certificate's revocation).
func (c *Client) closeIdle() {
	c.idempotent.HTTPClient.CloseIdleConnections()
	c.streams.CloseIdleConnections()
}

// isIdempotent reports whether a call of method may be sent twice with no
// other effect than once.
func isIdempotent(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPut, http.MethodDelete:
		return true
	}
	return false
}

// retryable reports whether a call that got resp or err may be sent again.
// A call of an idempotent method may: when it could not connect or lost
// its connection (unless the error is one no retry mends: a bad scheme or
// certificate, too many redirects), or when the agent (or a proxy in
// front of it) said 502, 503, 504 or 429. Any other call may only when
// its connection was never made, so not a byte of it reached the agent:
// a POST that reached it may have been done (resize_disk once grew a disk
// on each of 4 tries).
func retryable(idempotent bool, resp *http.Response, err error) bool {
	if err != nil {
		if !idempotent {
			var op *net.OpError
			return errors.As(err, &op) && op.Op == "dial"
		}
		retry, _ := retryablehttp.DefaultRetryPolicy(context.Background(), nil, err)
		return retry
	}
	if !idempotent {
		return false
	}
	switch resp.StatusCode {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout, http.StatusTooManyRequests:
		return true
	}
	return false
}

// target is an agent's address and credentials.
type target struct {
	id     string // compute id, for messages
	url    string // e.g. http://127.0.0.1:3081
	secret string
	// user and password, both set, go as HTTP Basic credentials (GNS3's
	// way of calling a compute).
	user, password string
}

// authorize sets the credentials of a call to the agent.
func (t target) authorize(h http.Header) {
	if t.secret != "" {
		h.Set(proto.SecretHeader, t.secret)
	}
	if t.user != "" && t.password != "" {
		h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(t.user+":"+t.password)))
	}
}

// call sends one request to an agent and decodes its JSON reply into out
// (unless out is nil). Failures come back as *project.Error: the agent's
// code mapped to a sentinel with the agent's message, or a conflict naming
// the compute when it cannot be reached (GNS3's wording).
func (c *Client) call(ctx context.Context, t target, method, path string, in, out any) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return err
		}
	}
	req, err := retryablehttp.NewRequestWithContext(ctx, method, t.url+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	t.authorize(req.Header)
	rc := c.post
	if isIdempotent(method) {
		rc = c.idempotent
	}
	resp, err := rc.Do(req)
	if err != nil {
		// The call's own time ran out; not errors.Is(err,
		// context.DeadlineExceeded), which a dial timeout matches too.
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return &project.Error{Kind: project.ErrConflict, Err: err,
				Msg: fmt.Sprintf("Timeout error for %s call to %s after %v", method, t.url+path, c.timeout)}
		}
		msg := fmt.Sprintf("Cannot connect to compute '%s' with request %s %s", t.id, method, path)
		if cause := tlsCause(err); cause != "" {
			msg += ": " + cause
		}
		return &project.Error{Kind: project.ErrConflict, Err: err, Msg: msg}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return &project.Error{Kind: project.ErrConflict, Err: err,
			Msg: fmt.Sprintf("Cannot read reply of compute '%s' to %s %s: %v", t.id, method, path, err)}
	}
	if resp.StatusCode/100 != 2 {
		return agentError(t, resp.StatusCode, data)
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return &project.Error{Kind: project.ErrInternal, Err: err,
				Msg: fmt.Sprintf("Invalid reply of compute '%s' to %s %s: %v", t.id, method, path, err)}
		}
	}
	return nil
}

// agentError turns an agent's error reply into a project error that keeps
// the agent's message and matches the sentinel of its code.
func agentError(t target, status int, body []byte) error {
	var pe proto.Error
	if err := json.Unmarshal(body, &pe); err != nil || pe.Message == "" {
		pe = proto.Error{Code: codeOf(status), Message: string(bytes.TrimSpace(body))}
	}
	kind := project.ErrInternal
	switch pe.Code {
	case proto.CodeInvalid:
		kind = project.ErrInvalid
	case proto.CodeForbidden:
		kind = project.ErrForbidden
	case proto.CodeNotFound:
		kind = project.ErrNotFound
	case proto.CodeConflict:
		kind = project.ErrConflict
	case proto.CodeUnauthorized:
		kind = project.ErrConflict
		pe.Message = fmt.Sprintf("Invalid authentication for compute %s", t.id)
	case proto.CodeUnavailable:
		kind = project.ErrConflict
	}
	return &project.Error{Kind: kind, Msg: pe.Message, Err: &pe}
}

func codeOf(status int) proto.Code {
	switch status {
	case 400:
		return proto.CodeInvalid
	case 401:
		return proto.CodeUnauthorized
	case 403:
		return proto.CodeForbidden
	case 404:
		return proto.CodeNotFound
	case 409:
		return proto.CodeConflict
	case 503:
		return proto.CodeUnavailable
	}
	return proto.CodeInternal
}

// stream opens a long GET (a capture stream) without retries or timeout;
// ctx ends it. The caller closes the body.
func (c *Client) stream(ctx context.Context, t target, path string) (io.ReadCloser, error) {
	resp, err := c.get(ctx, t, path)
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// get sends a GET to an agent without a timeout (a stream, or a file of
// any size) and returns the response when it is a 200; the caller closes
// its body.
func (c *Client) get(ctx context.Context, t target, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.url+path, nil)
	if err != nil {
		return nil, err
	}
	t.authorize(req.Header)
	resp, err := c.streams.Do(req)
	if err != nil {
		msg := fmt.Sprintf("Cannot connect to compute '%s' with request GET %s", t.id, path)
		if cause := tlsCause(err); cause != "" {
			msg += ": " + cause
		}
		return nil, &project.Error{Kind: project.ErrConflict, Err: err, Msg: msg}
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return nil, agentError(t, resp.StatusCode, data)
	}
	return resp, nil
}
