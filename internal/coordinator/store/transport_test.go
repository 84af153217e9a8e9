package store

import (
	"net"
	"testing"
)

// TestAdvertisedRaftAddr checks which raft advertise addresses are accepted.
func TestAdvertisedRaftAddr(t *testing.T) {
	bound := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7000}
	unspecified := &net.TCPAddr{IP: net.IPv4zero, Port: 7000}
	for _, tc := range []struct {
		advertise string
		bound     net.Addr
		want      string // "" : an error
	}{
		{"", bound, "127.0.0.1:7000"},
		{"", unspecified, ""},
		{"coordinator-0.coordinator-peer:7000", unspecified, "coordinator-0.coordinator-peer:7000"},
		{"10.0.0.5:7000", unspecified, "10.0.0.5:7000"},
		{"0.0.0.0:7000", unspecified, ""},
		{"coordinator-0", unspecified, ""},
		{"coordinator-0:0", unspecified, ""},
		{":7000", unspecified, ""},
	} {
		got, err := advertisedRaftAddr(tc.advertise, tc.bound)
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("advertise %q on %s: accepted as %s", tc.advertise, tc.bound, got)
		case tc.want != "" && (err != nil || got.String() != tc.want):
			t.Errorf("advertise %q on %s: %v, %v; want %s", tc.advertise, tc.bound, got, err, tc.want)
		}
	}
}
