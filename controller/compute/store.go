package compute

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"

	"github.com/labtap/labtap/internal/atomicfile"
)

// store saves the computes (but the local one) to a file and reads them
// back at start-up. Its lock serialises saves only.
type store struct {
	path string     // where the computes are saved; "" keeps them in memory
	mu   sync.Mutex // serialises save: the last save holds the newest list
	// beforeLock, when set, runs as a save starts, before it takes mu:
	// tests hold a save there while another change saves.
	beforeLock func()
}

// stored is a compute in the registry's file.
type stored struct {
	ID       string `json:"compute_id"`
	Name     string `json:"name"`
	Protocol string `json:"protocol"`
	Host     string `json:"host"`
	Port     int    `json:"port"`
	User     string `json:"user,omitempty"`
	Password string `json:"password,omitempty"`
	// SharedSecret: the compute holds the controller-wide secret.
	SharedSecret bool `json:"shared_secret,omitempty"`
	// CertSerial: the serial of the certificate the compute joined with.
	CertSerial string `json:"cert_serial,omitempty"`
}

// save writes every compute that list returns but the local one,
// atomically, readable by its owner only (it holds passwords). list is
// called under the store's lock, so two changes saving at once each write
// the list as it is when their turn comes and the last file written holds
// the newest list (a list taken before the lock could be older than the
// one another save has just written).
func (s *store) save(list func() []Compute) error {
	if s.path == "" {
		return nil
	}
	if s.beforeLock != nil {
		s.beforeLock()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []stored
	for _, c := range list() {
		if c.ID == LocalID {
			continue
		}
		out = append(out, stored{c.ID, c.Name, c.Protocol, c.Host, c.Port, c.User, c.Password, c.SharedSecret, c.CertSerial})
	}
	data, err := json.MarshalIndent(out, "", "    ")
	if err != nil {
		return err
	}
	if err := atomicfile.Write(s.path, data, 0o600); err != nil {
		return fmt.Errorf("save computes: %w", err)
	}
	return nil
}

// load reads the saved computes; none when there is no file.
func (s *store) load() ([]stored, error) {
	if s.path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(s.path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var list []stored
	if err := json.Unmarshal(data, &list); err != nil {
		return nil, fmt.Errorf("read %s: %w", s.path, err)
	}
	return list, nil
}
