package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/labtap/labtap/capspec"
)

// stopTimeout bounds the stop of a capture the extcap started, once
// Wireshark has stopped it.
const stopTimeout = 10 * time.Second

// capture streams an interface's live capture into the fifo until the
// capture stops, Wireshark stops the extcap (SIGTERM, ctx) or closes the
// fifo. A capture it had to start, it stops.
func capture(ctx context.Context, a args, getenv func(string) string) error {
	if a.fifo == "" {
		return errors.New("labtap-extcap: --capture needs --fifo")
	}
	projectID, linkID, err := parseIface(a.iface)
	if err != nil {
		return err
	}
	if msg := checkFilter(a.filter); msg != "" {
		return errors.New(msg)
	}
	// The fifo opens first: Wireshark then reports an error below as the
	// extcap's, not as a missing device.
	f, err := os.OpenFile(a.fifo, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("labtap-extcap: %v", err)
	}
	defer f.Close()
	file, ferr := readConfig(configPath())
	srvs := resolveServers(a.opts, getenv, file)
	if len(srvs) == 0 {
		if ferr != nil {
			return ferr
		}
		return errors.New("no labtap server: set its URL in the interface's options (the gear beside the interface), LABTAP_URL, or " + configPath())
	}
	if i, ok := unlistedServer(projectID, linkID); ok {
		if i >= len(srvs) {
			return errors.New("labtap-extcap: this server is no longer configured: refresh Wireshark's interfaces")
		}
		c, err := newClient(srvs[i])
		if err == nil {
			err = c.call(ctx, "GET", "/v2/projects", nil, nil)
		}
		if err == nil {
			return errors.New("labtap-extcap: " + srvs[i].URL + " answers now: refresh Wireshark's interfaces")
		}
		return err
	}
	c, err := serverOf(ctx, srvs, projectID)
	if err != nil {
		return err
	}
	var stream io.ReadCloser
	var stopIt func() error
	if linkID == "" {
		stream, stopIt, err = c.followProject(ctx, projectID, a.filter)
	} else {
		stream, stopIt, err = c.followLink(ctx, projectID, linkID, a.filter)
	}
	if err != nil {
		return err
	}
	defer stream.Close()
	cerr := pump(f, stream)
	if stopIt != nil {
		if err := stopIt(); err != nil && cerr == nil {
			cerr = err
		}
	}
	return cerr
}

// pump copies the stream into the fifo as it comes: each read is written
// at once. A fifo Wireshark closed (EPIPE) or a stream ended by the stop
// of the extcap is a normal end.
func pump(f io.Writer, stream io.Reader) error {
	buf := make([]byte, 64<<10)
	for {
		n, rerr := stream.Read(buf)
		if n > 0 {
			if _, err := f.Write(buf[:n]); err != nil {
				return nil // Wireshark stopped reading
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			if errors.Is(rerr, context.Canceled) || strings.Contains(rerr.Error(), "context canceled") {
				return nil
			}
			return fmt.Errorf("labtap-extcap: the stream ended: %v", rerr)
		}
	}
}

// serverOf picks the server that has the project: the only one, or the
// first of several that knows it.
func serverOf(ctx context.Context, srvs []server, projectID string) (*client, error) {
	var errs []error
	for _, s := range srvs {
		c, err := newClient(s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if len(srvs) == 1 {
			return c, nil
		}
		if err := c.call(ctx, "GET", "/v2/projects/"+projectID, nil, nil); err != nil {
			errs = append(errs, err)
			continue
		}
		return c, nil
	}
	return nil, errors.Join(append([]error{fmt.Errorf("no labtap server has project %s", projectID)}, errs...)...)
}

// followLink opens a link's live stream, starting its capture (with the
// filter) when it does not run; stop, when not nil, stops the capture it
// started. A capture that runs with another filter than the one asked for
// is an error: its frames are not the ones asked for.
func (c *client) followLink(ctx context.Context, projectID, linkID, filter string) (io.ReadCloser, func() error, error) {
	path := "/v2/projects/" + projectID + "/links/" + linkID
	var l linkJSON
	if err := c.call(ctx, "GET", path, nil, &l); err != nil {
		return nil, nil, err
	}
	var stop func() error
	if l.Capturing {
		if running := runningFilter(l); filter != "" && filter != running {
			return nil, nil, fmt.Errorf("this link captures already with capture filter %q, not %q: stop its capture or clear the capture filter", running, filter)
		}
	} else {
		if err := c.call(ctx, "POST", path+"/start_capture", capspec.Spec{Filter: filter}, &l); err != nil {
			return nil, nil, err
		}
		stop = func() error {
			sctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
			defer cancel()
			return c.call(sctx, "POST", path+"/stop_capture", nil, nil)
		}
	}
	body, err := c.open(ctx, path+"/pcap")
	if err != nil {
		if stop != nil {
			stop()
		}
		return nil, nil, err
	}
	return body, stop, nil
}

func runningFilter(l linkJSON) string {
	if l.Capture == nil {
		return ""
	}
	return l.Capture.Spec.Filter
}

// followProject opens a project's live stream, starting the whole-project
// capture (into a file of its own, named after the time) when it does not
// run; stop, when not nil, stops the capture it started.
func (c *client) followProject(ctx context.Context, projectID, filter string) (io.ReadCloser, func() error, error) {
	path := "/v2/projects/" + projectID
	var stop func() error
	spec := capspec.Spec{Filter: filter, FileName: "wireshark-" + time.Now().UTC().Format("20060102-150405") + ".pcapng"}
	err := c.call(ctx, "POST", path+"/start_capture", spec, nil)
	var ae *apiError
	switch {
	case err == nil:
		stop = func() error {
			sctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
			defer cancel()
			return c.call(sctx, "POST", path+"/stop_capture", nil, nil)
		}
	case errors.As(err, &ae) && ae.Status == 409:
		// It runs already (or the name is taken: the stream says which).
		if filter != "" {
			return nil, nil, fmt.Errorf("%v: the project's running capture goes on without this capture filter", err)
		}
	default:
		return nil, nil, err
	}
	body, oerr := c.open(ctx, path+"/pcap")
	if oerr != nil {
		if stop != nil {
			stop()
		}
		if err != nil {
			return nil, nil, fmt.Errorf("%v; %v", err, oerr)
		}
		return nil, nil, oerr
	}
	return body, stop, nil
}
