package server

import (
	"github.com/labtap/labtap/agent/bridge"
	"github.com/labtap/labtap/agent/host"
	"github.com/prometheus/client_golang/prometheus"
)

// linkCollector exports the counters of the agent's links and captures,
// and what its captures' memory holds, read from the host at each scrape.
type linkCollector struct {
	h *host.Host

	received, forwarded, forwardedBytes, filtered, queueDropped, sendErrors, delayed *prometheus.Desc
	capFrames, capBytes, capDropped, capRotated, capActive                           *prometheus.Desc
	memInUse, memAllocated, memMax, memRefused                                       *prometheus.Desc
	budget, budgetFiles, budgetBytes                                                 *prometheus.Desc
}

func newLinkCollector(h *host.Host) *linkCollector {
	link := []string{"project_id", "link_id", "direction"}
	capture := []string{"project_id", "link_id"}
	d := func(name, help string, labels []string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	return &linkCollector{
		h:              h,
		received:       d("labtap_link_frames_received_total", "Frames a link received, per direction.", link),
		forwarded:      d("labtap_link_frames_forwarded_total", "Frames a link forwarded (sent out of its other end), per direction.", link),
		forwardedBytes: d("labtap_link_bytes_forwarded_total", "Bytes of the frames a link forwarded, per direction.", link),
		filtered: d("labtap_link_frames_filtered_total",
			"Frames a link's filters dropped, per direction and filter (suspend, bpf, frequency_drop, packet_loss).",
			append(link[:3:3], "filter")),
		queueDropped: d("labtap_link_frames_queue_dropped_total",
			"Frames a link dropped because a queue was full, per direction and queue (delay: the delay filter's line).",
			append(link[:3:3], "queue")),
		sendErrors: d("labtap_link_frames_send_errors_total", "Frames a link could not send (no peer yet, a socket error), per direction.", link),
		delayed:    d("labtap_link_frames_delayed", "Frames in a link's delay line now, per direction.", link),
		capFrames:  d("labtap_capture_frames_written_total", "Records a link's capture has written (a new capture starts from 0).", capture),
		capBytes:   d("labtap_capture_bytes_written_total", "Size of a link's capture file(s), in bytes.", capture),
		capDropped: d("labtap_capture_records_dropped_total", "Records a link's capture dropped because the disk could not take them in time or the agent's capture memory was exhausted.", capture),
		capRotated: d("labtap_capture_files_rotated_total", "Files a link's capture started after its first (ring files).", capture),
		capActive:  d("labtap_capture_active", "1 while a link captures, 0 once its capture stopped.", capture),
		memInUse:   d("labtap_capture_memory_in_use_bytes", "Memory the agent's captures hold now to queue their records.", nil),
		memAllocated: d("labtap_capture_memory_allocated_bytes",
			"Memory the agent's capture pool holds of the kernel's: in use, and free regions not given back yet.", nil),
		memMax: d("labtap_capture_memory_max_bytes", "Bound of the memory the agent's captures may hold.", nil),
		memRefused: d("labtap_capture_memory_refused_total",
			"Blocks the agent's captures asked for while their memory was exhausted (the frames are counted in labtap_capture_records_dropped_total).", nil),
		budget: d("labtap_capture_disk_budget_bytes", "The bound of the agent's capture files (--capture-disk-budget), 0 for none.", nil),
		budgetFiles: d("labtap_capture_files_removed_total",
			"Stopped capture files the disk budget removed (the oldest first).", nil),
		budgetBytes: d("labtap_capture_bytes_removed_total", "Bytes of the capture files the disk budget removed.", nil),
	}
}

func (c *linkCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.received, c.forwarded, c.forwardedBytes, c.filtered, c.queueDropped,
		c.sendErrors, c.delayed, c.capFrames, c.capBytes, c.capDropped, c.capRotated, c.capActive,
		c.memInUse, c.memAllocated, c.memMax, c.memRefused, c.budget, c.budgetFiles, c.budgetBytes} {
		ch <- d
	}
}

var directions = [2]string{"a_to_b", "b_to_a"}

func (c *linkCollector) Collect(ch chan<- prometheus.Metric) {
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v))
	}
	mem := c.h.Captures.Memory()
	gauge(c.memInUse, mem.InUse)
	gauge(c.memAllocated, mem.Allocated)
	gauge(c.memMax, mem.Max)
	counter(c.memRefused, mem.Refused)
	ret := c.h.Captures.Retention()
	gauge(c.budget, ret.Budget)
	counter(c.budgetFiles, ret.FilesRemoved)
	counter(c.budgetBytes, ret.BytesRemoved)
	for _, l := range c.h.Metrics() {
		for i, s := range l.Relay {
			dir := directions[i]
			counter(c.received, s.Received, l.ProjectID, l.LinkID, dir)
			counter(c.forwarded, s.Forwarded, l.ProjectID, l.LinkID, dir)
			counter(c.forwardedBytes, s.ForwardedBytes, l.ProjectID, l.LinkID, dir)
			for _, r := range bridge.DropReasons {
				counter(c.filtered, s.FilteredBy[r], l.ProjectID, l.LinkID, dir, r.String())
			}
			counter(c.queueDropped, s.DelayDrops, l.ProjectID, l.LinkID, dir, "delay")
			counter(c.sendErrors, s.SendErrors, l.ProjectID, l.LinkID, dir)
			ch <- prometheus.MustNewConstMetric(c.delayed, prometheus.GaugeValue, float64(s.Delayed), l.ProjectID, l.LinkID, dir)
		}
		if cp := l.Capture; cp != nil {
			counter(c.capFrames, cp.Frames, l.ProjectID, l.LinkID)
			counter(c.capBytes, cp.Bytes, l.ProjectID, l.LinkID)
			counter(c.capDropped, cp.Dropped, l.ProjectID, l.LinkID)
			counter(c.capRotated, cp.Rotations, l.ProjectID, l.LinkID)
			active := 0.0
			if cp.Active {
				active = 1
			}
			ch <- prometheus.MustNewConstMetric(c.capActive, prometheus.GaugeValue, active, l.ProjectID, l.LinkID)
		}
	}
}
