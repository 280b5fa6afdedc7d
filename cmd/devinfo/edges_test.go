package main

import (
	"testing"

	"github.com/pureverbs/pureverbs/uverbs"
)

// TestValueStrings: every value of ibv_devinfo's (rdma-core 44's) string
// tables that rxe never reports.
func TestValueStrings(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{widthString(1), "1"}, {widthString(2), "4"}, {widthString(4), "8"}, {widthString(8), "12"}, {widthString(16), "2"}, {widthString(3), "invalid width"},
		{speedString(1), "2.5 Gbps"}, {speedString(2), "5.0 Gbps"}, {speedString(4), "10.0 Gbps"}, {speedString(8), "10.0 Gbps"},
		{speedString(16), "14.0 Gbps"}, {speedString(32), "25.0 Gbps"}, {speedString(64), "50.0 Gbps"}, {speedString(128), "100.0 Gbps"}, {speedString(3), "invalid speed"},
		{vlString(1), "1"}, {vlString(2), "2"}, {vlString(3), "4"}, {vlString(4), "8"}, {vlString(5), "15"}, {vlString(6), "invalid value"},
		{atomicCapString(0), "ATOMIC_NONE"}, {atomicCapString(1), "ATOMIC_HCA"}, {atomicCapString(2), "ATOMIC_GLOB"}, {atomicCapString(3), "invalid atomic capability"},
		{physStateString(1), "SLEEP"}, {physStateString(2), "POLLING"}, {physStateString(3), "DISABLED"},
		{physStateString(4), "PORT_CONFIGURATION TRAINNING"}, {physStateString(5), "LINK_UP"}, {physStateString(6), "LINK_ERROR_RECOVERY"},
		{physStateString(7), "PHY TEST"}, {physStateString(8), "invalid physical state"},
		{linkLayerString(uverbs.LinkLayerUnspecified), "Unspecified"}, {linkLayerString(uverbs.LinkLayerInfiniBand), "InfiniBand"},
		{linkLayerString(uverbs.LinkLayerEthernet), "Ethernet"}, {linkLayerString(9), "Unknown"},
		{mtuString(0), "invalid MTU"}, {mtuString(6), "invalid MTU"}, {mtuString(5), "4096"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
