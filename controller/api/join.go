package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/labtap/labtap/controller/compute"
	"github.com/labtap/labtap/controller/project"
)

// Enroller lets agents join with one-time tokens (--tls auto).
// *compute.Enrollment satisfies it.
type Enroller interface {
	NewToken(ttl time.Duration) (compute.JoinToken, error)
	Join(ctx context.Context, req compute.JoinRequest) (compute.JoinReply, error)
	CAFingerprint() string
}

// Join routes.
const (
	rJoinTokens = "/v3/computes/join-tokens"
	rJoin       = "/v3/computes/join"
)

// maxJoinBody bounds a join request (a CSR is about 500 bytes).
const maxJoinBody = 16 << 10

func noEnrollment() error {
	return &project.Error{Kind: project.ErrConflict, Msg: "Agents join only a controller started with --tls auto (its CA signs their certificates)"}
}

// registerJoin adds POST /v3/computes/join, before the API's
// authentication: a joining agent proves itself with its one-time token
// instead. The token route is an ordinary, authenticated one (register).
func (a *API) registerJoin(app *fiber.App) {
	a.accessTemplates = append(a.accessTemplates, rJoin)
	value := []byte(rJoin)
	app.Post(rJoin, a.boundBody, func(c *fiber.Ctx) error {
		c.Response().Header.SetCanonical(xRoute, value)
		if a.cfg.Enroll == nil {
			return noEnrollment()
		}
		if len(c.Body()) > maxJoinBody {
			return &project.Error{Kind: project.ErrInvalid, Msg: "A join request is at most 16 KiB"}
		}
		var req compute.JoinRequest
		if err := decodeJoin(c.Body(), &req); err != nil {
			return err
		}
		reply, err := a.cfg.Enroll.Join(c.UserContext(), req)
		if err != nil {
			a.log.Warn("agent join refused", "compute_id", truncateString(req.ComputeID, 64), "from", c.IP(), "err", err)
			return err
		}
		a.log.Info("agent joined", "compute_id", reply.ComputeID, "from", c.IP())
		return c.Status(fiber.StatusCreated).JSON(reply)
	})
}

// decodeJoin decodes a join route's JSON object body; anything else is a
// 400 that says what was wrong.
func decodeJoin(body []byte, v any) error {
	if b := bytes.TrimSpace(body); len(b) == 0 || b[0] != '{' {
		return &project.Error{Kind: project.ErrInvalid, Msg: "The body must be a JSON object"}
	}
	if err := json.Unmarshal(body, v); err != nil {
		if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
			return &project.Error{Kind: project.ErrInvalid, Msg: fmt.Sprintf("%s must be %s", te.Field, te.Type)}
		}
		return &project.Error{Kind: project.ErrInvalid, Msg: "The body is not valid JSON"}
	}
	return nil
}

// joinTokenRequest is the body of POST /v3/computes/join-tokens.
type joinTokenRequest struct {
	// TTL is how long the token is valid, in seconds (default an hour).
	TTL int64 `json:"ttl"`
}

// newJoinToken makes a one-time token an agent joins with.
func (a *API) newJoinToken(c *fiber.Ctx) error {
	if a.cfg.Enroll == nil {
		return noEnrollment()
	}
	var req joinTokenRequest
	if len(c.Body()) > 0 {
		if err := decodeJoin(c.Body(), &req); err != nil {
			return err
		}
	}
	if req.TTL < 0 || req.TTL > int64(compute.MaxJoinTokenTTL/time.Second) {
		return &project.Error{Kind: project.ErrInvalid, Msg: "ttl is 1 to 604800 seconds"}
	}
	tok, err := a.cfg.Enroll.NewToken(time.Duration(req.TTL) * time.Second)
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(fiber.Map{
		"token": tok.Token, "expires_at": tok.ExpiresAt.UTC().Format(time.RFC3339), "ca_sha256": a.cfg.Enroll.CAFingerprint(),
	})
}
