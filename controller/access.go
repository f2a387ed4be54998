package main

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"

	"github.com/labtap/labtap/controller/access"
)

// openAccess opens the users, groups, roles and ACL of /v3/access
// (access.db and its token key access_jwt_secret, both in the data
// directory) when --user and --password are set; nil otherwise, and the
// /v3/access routes are off. At the first start the user of the flags
// becomes the super admin; later the database's users stand, whatever the
// flags say (they still are /v2's Basic credential).
func openAccess(ctx context.Context, o options, log *slog.Logger) (*access.Service, error) {
	if o.User == "" || o.Password == "" {
		return nil, nil
	}
	log = log.With("component", "access")
	svc, err := access.Open(ctx, access.Config{Path: filepath.Join(o.DataDir, "access.db"), Logger: log})
	if err != nil {
		return nil, err
	}
	made, err := svc.Bootstrap(ctx, o.User, o.Password)
	if errors.Is(err, access.ErrInvalid) {
		// /v2 takes these credentials as they are; /v3 needs a password
		// bcrypt can hold and a plain username.
		log.Warn("/v3/access is off: --user and --password cannot make its first super admin", "err", err)
		svc.Close()
		return nil, nil
	}
	if err != nil {
		svc.Close()
		return nil, err
	}
	if made {
		log.Info("/v3/access: first super admin created", "user", o.User)
	}
	return svc, nil
}
