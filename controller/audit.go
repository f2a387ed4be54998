package main

import (
	"os"
	"path/filepath"

	"gopkg.in/natefinch/lumberjack.v2"
)

// openAudit opens the audit trail (see api.AuditRecord): JSON lines in
// <data>/audit/audit.log, which lumberjack rotates once it reaches
// maxMB megabytes, keeping the keep most recent rotated files beside it
// (audit-<time>.log), so the trail takes at most (keep+1)×maxMB on disk.
// The files are mode 0600: they name users and client addresses.
func openAudit(dataDir string, maxMB, keep int) (*lumberjack.Logger, error) {
	dir := filepath.Join(dataDir, "audit")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	return &lumberjack.Logger{Filename: filepath.Join(dir, "audit.log"), MaxSize: maxMB, MaxBackups: keep}, nil
}
