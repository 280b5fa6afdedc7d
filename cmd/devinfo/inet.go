package main

import (
	"fmt"
	"strings"

	"github.com/pureverbs/pureverbs/uverbs"
)

// inetNtop6 formats a GID as glibc's inet_ntop(AF_INET6) does, which is
// what ibv_devinfo prints for RoCE v2 GIDs:
//
//   - the longest run of two or more zero groups (the first of equal runs)
//     becomes "::";
//   - groups are lowercase hex without leading zeros;
//   - an address whose first 96 bits are 0 (IPv4-compatible) or
//     0:0:0:0:0:ffff (IPv4-mapped) ends in dotted IPv4, e.g.
//     "::ffff:10.99.0.1" (net.IP.String would print just "10.99.0.1").
//
// glibc does not apply the IPv4 form to "::" or "::1" because their zero
// run is longer than six groups.
func inetNtop6(g uverbs.GID) string {
	var words [8]int
	for i := range words {
		words[i] = int(g[2*i])<<8 | int(g[2*i+1])
	}
	bestBase, bestLen := -1, 0
	curBase, curLen := -1, 0
	for i, w := range words {
		if w == 0 {
			if curBase < 0 {
				curBase, curLen = i, 1
			} else {
				curLen++
			}
			continue
		}
		if curBase >= 0 {
			if bestBase < 0 || curLen > bestLen {
				bestBase, bestLen = curBase, curLen
			}
			curBase = -1
		}
	}
	if curBase >= 0 && (bestBase < 0 || curLen > bestLen) {
		bestBase, bestLen = curBase, curLen
	}
	if bestBase >= 0 && bestLen < 2 {
		bestBase = -1
	}

	var b strings.Builder
	for i := 0; i < 8; i++ {
		if bestBase >= 0 && i >= bestBase && i < bestBase+bestLen {
			if i == bestBase {
				b.WriteByte(':')
			}
			continue
		}
		if i != 0 {
			b.WriteByte(':')
		}
		if i == 6 && bestBase == 0 && (bestLen == 6 || bestLen == 5 && words[5] == 0xffff) {
			fmt.Fprintf(&b, "%d.%d.%d.%d", g[12], g[13], g[14], g[15])
			return b.String()
		}
		fmt.Fprintf(&b, "%x", words[i])
	}
	if bestBase >= 0 && bestBase+bestLen == 8 {
		b.WriteByte(':')
	}
	return b.String()
}
