package compute

import (
	"bufio"
	"context"
	"encoding/json"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/labtap/labtap/capspec"
	"github.com/labtap/labtap/controller/project"
	"github.com/labtap/labtap/proto"
)

// Listener hears what agents report by themselves, and when an agent is
// lost or comes back. project.Service.Reports satisfies it. Calls for one compute
// come one at a time, in order.
type Listener interface {
	CaptureEnded(ctx context.Context, computeID, projectID, linkID string, st capspec.State)
	CaptureRotated(ctx context.Context, computeID, projectID, linkID string, st capspec.State)
	NodeChanged(ctx context.Context, computeID, projectID, nodeID string, rt project.NodeRuntime)
	ComputeLost(ctx context.Context, computeID string)
	// ComputeBack gets what the compute still runs (nil if it could not
	// tell).
	ComputeBack(ctx context.Context, computeID string, running []project.Running)
}

// Warner is a Listener that also hears what an agent tells a node's users
// in words (a VM that runs without KVM). project.Service.Reports satisfies it.
type Warner interface {
	NodeWarning(ctx context.Context, computeID, projectID, nodeID, message string)
}

// silence is how long an events stream may stay quiet before its agent is
// taken for lost: three pings.
const silence = 3 * proto.PingInterval

// Watch follows the events stream of every registered compute until ctx is
// done, and tells l what happens: an agent that dies is lost at once (its
// connection breaks), one cut off by the network after three missed pings.
// When a lost agent answers again, l reconciles it. Computes added later
// are watched as they come; removed ones are dropped. It returns when
// every compute's watcher has ended.
func (h *Health) Watch(ctx context.Context, l Listener) error {
	watching := map[string]context.CancelFunc{}
	var watchers sync.WaitGroup
	defer func() {
		for _, cancel := range watching {
			cancel()
		}
		watchers.Wait()
	}()
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		ids := map[string]bool{}
		for _, c := range h.reg.List() {
			ids[c.ID] = true
			if _, ok := watching[c.ID]; !ok {
				wctx, cancel := context.WithCancel(ctx)
				watching[c.ID] = cancel
				watchers.Go(func() { h.watch(wctx, c.ID, l) })
			}
		}
		for id, cancel := range watching {
			if !ids[id] {
				cancel()
				delete(watching, id)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// watch follows one compute's stream, reconnecting with backoff.
func (h *Health) watch(ctx context.Context, id string, l Listener) {
	log := h.log.With("compute", id)
	lost := false
	wait := &backoff.ExponentialBackOff{InitialInterval: 250 * time.Millisecond, MaxInterval: 5 * time.Second,
		Multiplier: 2, RandomizationFactor: 0.5} // jitter: a controller restart does not reconnect every compute at once
	wait.Reset()
	for ctx.Err() == nil {
		err := h.follow(ctx, id, l, func() {
			wait.Reset()
			h.reg.setConnected(id, nil)
			if lost {
				lost = false
				log.Info("compute back: reconciling")
				l.ComputeBack(ctx, id, h.agents.runningOn(ctx, id))
			}
		})
		if ctx.Err() != nil {
			return
		}
		if !lost {
			lost = true
			log.Warn("compute lost", "err", err)
			h.reg.setConnected(id, err)
			l.ComputeLost(ctx, id)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait.NextBackOff()):
		}
	}
}

// follow reads one connection of a compute's events stream until it
// breaks or goes silent; connected is called once the agent has said hello.
func (h *Health) follow(ctx context.Context, id string, l Listener, connected func()) error {
	t, err := h.reg.target(id)
	if err != nil {
		return err
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	quiet := time.AfterFunc(silence, cancel) // a silent agent is lost, even one that never answers
	defer quiet.Stop()
	body, err := h.client.stream(sctx, t, proto.EventsPath)
	if err != nil {
		return err
	}
	defer body.Close()
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// The clock stops while l works: a listener waiting for a long
		// project operation is not the agent going silent.
		quiet.Stop()
		h.dispatch(ctx, id, l, sc.Bytes(), connected)
		quiet.Reset(silence)
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if sctx.Err() != nil && ctx.Err() == nil {
		return errSilent
	}
	return errStreamEnded
}

// dispatch handles one line of a compute's events stream.
func (h *Health) dispatch(ctx context.Context, id string, l Listener, line []byte, connected func()) {
	var ev proto.Event
	if err := json.Unmarshal(line, &ev); err != nil {
		h.log.Debug("unreadable event", "compute", id, "err", err)
		return
	}
	switch ev.Kind {
	case proto.EventHello:
		h.reg.noteInfo(id, ev.Info)
		connected()
	case proto.EventPing:
		h.reg.noteInfo(id, ev.Info)
	case proto.EventCaptureEnded:
		var st capspec.State
		if ev.Capture != nil {
			st = *ev.Capture
		}
		l.CaptureEnded(ctx, id, ev.ProjectID, ev.LinkID, st)
	case proto.EventCaptureRotated:
		if ev.Capture != nil {
			l.CaptureRotated(ctx, id, ev.ProjectID, ev.LinkID, *ev.Capture)
		}
	case proto.EventNodeStatus:
		if ev.Node != nil {
			l.NodeChanged(ctx, id, ev.ProjectID, ev.NodeID, runtimeOf(*ev.Node))
		}
	case proto.EventNodeWarning:
		if w, ok := l.(Warner); ok && ev.Message != "" {
			w.NodeWarning(ctx, id, ev.ProjectID, ev.NodeID, ev.Message)
		}
	}
}

type streamError string

func (e streamError) Error() string { return string(e) }

const (
	errSilent      = streamError("the agent's events stream went silent")
	errStreamEnded = streamError("the agent ended its events stream")
)

// Health checks the computes' agents and follows their events: it keeps
// the registry's view of each compute's health, and tells a Listener what
// happens on them. It has no state of its own beyond its watchers, which
// Watch owns. A Registry makes it (Registry.Health).
type Health struct {
	reg    *Registry
	agents *Agents
	client *Client
	log    *slog.Logger
}

// check asks a compute for its info and records the answer.
func (h *Health) check(ctx context.Context, id string) {
	t, err := h.reg.target(id)
	if err != nil {
		return
	}
	var info proto.AgentInfo
	err = h.client.call(ctx, t, "GET", proto.InfoPath, nil, &info)
	h.reg.noteCheck(id, info, err)
}

// noteCheck records the answer of a compute's check (err: none).
func (r *Registry) noteCheck(id string, info proto.AgentInfo, err error) {
	r.mu.Lock()
	defer func() {
		c, ok := r.computes[id]
		var snapshot Compute
		if ok {
			snapshot = *c
		}
		r.mu.Unlock()
		if ok {
			r.onChange("compute.updated", snapshot)
		}
	}()
	c, ok := r.computes[id]
	if !ok {
		return
	}
	if err != nil {
		if c.Connected {
			r.log.Warn("compute lost", "compute", id, "err", err)
		}
		c.Connected, c.CPUPercent, c.MemoryPercent, c.Capacity, c.LastError = false, nil, nil, nil, err.Error()
		return
	}
	if !c.Connected {
		r.log.Info("compute connected", "compute", id, "version", info.SoftwareVersion)
	}
	cpu, mem := info.CPUPercent, info.MemoryPercent
	c.Connected, c.CPUPercent, c.MemoryPercent, c.LastError = true, &cpu, &mem, ""
	c.Platform, c.NodeTypes, c.Unavailable = info.Platform, slices.Clone(info.NodeTypes), maps.Clone(info.Unavailable)
	c.Capacity = cloneCapacity(info.Capacity)
}

func cloneCapacity(c *proto.Capacity) *proto.Capacity {
	if c == nil {
		return nil
	}
	v := *c
	return &v
}

// setConnected records a compute's reachability (err nil: connected).
func (r *Registry) setConnected(id string, err error) {
	r.mu.Lock()
	c, ok := r.computes[id]
	if !ok {
		r.mu.Unlock()
		return
	}
	changed := c.Connected != (err == nil)
	c.Connected = err == nil
	if err != nil {
		c.CPUPercent, c.MemoryPercent, c.LastError = nil, nil, err.Error()
	} else {
		c.LastError = ""
	}
	snap := *c
	r.mu.Unlock()
	if changed {
		r.onChange("compute.updated", snap)
	}
}

// noteInfo records what an agent says of itself.
func (r *Registry) noteInfo(id string, info *proto.AgentInfo) {
	if info == nil {
		return
	}
	r.mu.Lock()
	c, ok := r.computes[id]
	var snap Compute
	if ok {
		cpu, mem := info.CPUPercent, info.MemoryPercent
		c.CPUPercent, c.MemoryPercent = &cpu, &mem
		c.Platform, c.NodeTypes = info.Platform, append([]string(nil), info.NodeTypes...)
		c.Unavailable = maps.Clone(info.Unavailable)
		c.Capacity = cloneCapacity(info.Capacity)
		snap = *c
	}
	r.mu.Unlock()
	if ok {
		r.onChange("compute.updated", snap) // GNS3 announces every load report
	}
}
