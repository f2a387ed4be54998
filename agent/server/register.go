package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/labtap/labtap/proto"
)

// Registration is how an agent announces itself to a controller: the
// compute the controller records, under GNS3's POST /v2/computes.
type Registration struct {
	// Controller is the controller's base URL, e.g. http://ctl:3080. A
	// user and password in it are sent as HTTP Basic credentials.
	Controller string
	ComputeID  string
	Name       string
	// Host and Port are where the controller (and other agents, for
	// tunnels) reach this agent.
	Host string
	Port int
	// Secret, when set, is sent (proto.SecretHeader) to prove the agent
	// shares the controller's secret: only then does the controller call
	// it with that secret.
	Secret string
	// Logger reports attempts; nil discards.
	Logger *slog.Logger
	// Transport carries the calls; nil means http.DefaultTransport.
	Transport http.RoundTripper
}

// Register announces the agent to its controller, retrying with backoff
// (up to 10 s apart) until the controller answers or ctx is done. The
// compute is created, or its address updated if the controller knew it
// elsewhere: an agent that moved, or came back on a new port, is found
// again. A refusal the agent cannot fix by waiting (bad credentials, a
// reserved id) is returned at once.
func Register(ctx context.Context, reg Registration) error {
	log := reg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	base, err := url.Parse(reg.Controller)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return fmt.Errorf("controller URL %q: want http://host:port", reg.Controller)
	}
	user := base.User
	base.User = nil
	endpoint := strings.TrimSuffix(base.String(), "/") + "/v2/computes"
	client := &http.Client{Timeout: 10 * time.Second, Transport: reg.Transport}
	wait := &backoff.ExponentialBackOff{InitialInterval: 250 * time.Millisecond, MaxInterval: 10 * time.Second,
		Multiplier: 2, RandomizationFactor: 0.5} // jitter: agents restarted together do not call together
	wait.Reset()
	for {
		err := registerOnce(ctx, client, endpoint, user, reg)
		if err == nil {
			log.Info("registered with the controller", "controller", endpoint, "compute_id", reg.ComputeID)
			return nil
		}
		if _, final := errors.AsType[refusedError](err); final {
			return err
		}
		in := wait.NextBackOff()
		log.Warn("register with the controller: will retry", "controller", endpoint, "err", err, "in", in)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(in):
		}
	}
}

// refusedError is a controller's answer that retrying will not change.
type refusedError struct{ msg string }

func (e refusedError) Error() string { return e.msg }

func registerOnce(ctx context.Context, client *http.Client, endpoint string, user *url.Userinfo, reg Registration) error {
	body := map[string]any{
		"compute_id": reg.ComputeID, "name": reg.Name, "protocol": "http",
		"host": reg.Host, "port": reg.Port,
	}
	var got struct {
		Host string `json:"host"`
		Port int    `json:"port"`
	}
	if err := call(ctx, client, "POST", endpoint, user, reg.Secret, body, &got); err != nil {
		return err
	}
	if got.Host == reg.Host && got.Port == reg.Port {
		return nil
	}
	// Known at another address: the agent moved.
	return call(ctx, client, "PUT", endpoint+"/"+url.PathEscape(reg.ComputeID), user, reg.Secret,
		map[string]any{"host": reg.Host, "port": reg.Port}, nil)
}

func call(ctx context.Context, client *http.Client, method, u string, user *url.Userinfo, secret string, body, out any) error {
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(data))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if secret != "" {
		req.Header.Set(proto.SecretHeader, secret)
	}
	if user != nil {
		pw, _ := user.Password()
		req.SetBasicAuth(user.Username(), pw)
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	reply, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		var e struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(reply, &e)
		err := fmt.Errorf("%s %s: %s: %s", method, u, resp.Status, e.Message)
		if resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != http.StatusRequestTimeout && resp.StatusCode != http.StatusTooManyRequests {
			return refusedError{err.Error()}
		}
		return err
	}
	if out != nil {
		return json.Unmarshal(reply, out)
	}
	return nil
}
