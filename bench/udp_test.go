package main

import (
	"net"
	"testing"
	"time"
)

// The table read once gives each socket's figure by its port: bytes sent
// to a socket nobody reads are counted as queued on its port, and on no
// other.
func TestUDPTableCountsEachSocketByItsPort(t *testing.T) {
	var ports []int
	var conns []*net.UDPConn
	for range 2 {
		c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, c)
		ports = append(ports, c.LocalAddr().(*net.UDPAddr).Port)
	}
	if _, err := conns[1].WriteToUDP(make([]byte, 100), conns[0].LocalAddr().(*net.UDPAddr)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		q := udpQueued()
		if q.sum(ports[0]) > 0 {
			if n := q.sum(ports[1]); n != 0 {
				t.Fatalf("port %d (nothing sent to it) has %d bytes queued", ports[1], n)
			}
			if q.sum(ports...) != q.sum(ports[0]) {
				t.Fatal("sum over both ports is not the sum of each")
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("port %d: nothing queued, though a datagram waits", ports[0])
		}
		time.Sleep(10 * time.Millisecond)
	}
}
