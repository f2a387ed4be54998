package main

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// accessCall sends a request with a body and an Authorization header, and
// returns the status and the body.
func accessCall(t *testing.T, method, u, auth, ctype, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, u, strings.NewReader(body))
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func accessLogin(t *testing.T, c *controller, user, pass string) (int, string) {
	t.Helper()
	code, body := accessCall(t, "POST", c.url+"/v3/access/users/login", "", "application/x-www-form-urlencoded",
		url.Values{"username": {user}, "password": {pass}}.Encode())
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	json.Unmarshal([]byte(body), &tok)
	return code, tok.AccessToken
}

// TestAccessIsBootstrappedFromTheBasicFlags starts the controller with
// --user and --password: that user is the super admin of /v3/access,
// /v2 keeps the flags' Basic credential, and at a restart with another
// password the database's password stands, with a warning.
func TestAccessIsBootstrappedFromTheBasicFlags(t *testing.T) {
	data := t.TempDir()
	c := startControllerWith(t, data, nil, "--local-agent=false", "--user", "admin", "--password", "first-password")
	code, tok := accessLogin(t, c, "admin", "first-password")
	if code != 200 || tok == "" {
		t.Fatalf("login: %d", code)
	}
	if code, body := accessCall(t, "GET", c.url+"/v3/access/users/me", "Bearer "+tok, "", ""); code != 200 || !strings.Contains(body, `"is_superadmin":true`) {
		t.Fatalf("me: %d %s", code, body)
	}
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("admin:first-password"))
	if code, _ := accessCall(t, "GET", c.url+"/v2/version", basic, "", ""); code != 200 {
		t.Fatalf("/v2 with the flags' credential: %d", code)
	}
	for _, f := range []string{"access.db", "access_jwt_secret"} {
		if fi, err := os.Stat(filepath.Join(data, f)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v", f, err, fi)
		}
	}
	c.stop()

	c = startControllerWith(t, data, nil, "--local-agent=false", "--user", "admin", "--password", "second-password")
	if code, _ := accessLogin(t, c, "admin", "first-password"); code != 200 {
		t.Errorf("the database's password after the restart: %d", code)
	}
	if code, _ := accessLogin(t, c, "admin", "second-password"); code != 401 {
		t.Errorf("the new flag password on /v3: %d, want 401", code)
	}
	// The database is the truth on /v2 as well: a user's password is the
	// one its user set (or an administrator did), not what a restart's
	// flags say; else whoever can change the flags could take over every
	// account of that name, and a changed password would not lock out the
	// old one.
	for pass, want := range map[string]int{"first-password": 200, "second-password": 401} {
		basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("admin:"+pass))
		if code, _ := accessCall(t, "GET", c.url+"/v2/version", basic, "", ""); code != want {
			t.Errorf("/v2 with %s after the restart: %d, want %d", pass, code, want)
		}
	}
	if code, _ := accessCall(t, "GET", c.url+"/v2/version", "Bearer "+tok, "", ""); code != 200 {
		t.Errorf("/v2 with the first run's token: %d", code)
	}
	// A token of the first run still works after the restart.
	if code, _ := accessCall(t, "GET", c.url+"/v3/access/users/me", "Bearer "+tok, "", ""); code != 200 {
		t.Errorf("first run's token: %d", code)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(c.log.String(), "password differs") && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(c.log.String(), "level=WARN") || !strings.Contains(c.log.String(), "password differs") {
		t.Errorf("no warning about the differing password:\n%s", c.log.String())
	}
	c.stop()

	// Without --user and --password there is no /v3/access.
	c = startControllerWith(t, data, nil, "--local-agent=false")
	if code, _ := accessCall(t, "GET", c.url+"/v3/access/users/me", "Bearer "+tok, "", ""); code != 404 {
		t.Errorf("/v3/access without the flags: %d, want 404", code)
	}
}
