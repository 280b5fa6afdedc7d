package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// rdmaInfo is struct rping_rdma_info, the one message the peers SEND each
// other: a buffer's address, its rkey and the ping size, every field
// big-endian. The client sends it to advertise a buffer; the server's
// "go ahead" is the same 16 bytes (all zero: it never fills them).
type rdmaInfo struct {
	Addr uint64
	RKey uint32
	Size uint32
}

// rdmaInfoLen is sizeof(struct rping_rdma_info): 8 + 4 + 4, no padding.
const rdmaInfoLen = 16

// put writes the message into b (at least rdmaInfoLen bytes).
func (m rdmaInfo) put(b []byte) {
	binary.BigEndian.PutUint64(b[0:], m.Addr)
	binary.BigEndian.PutUint32(b[8:], m.RKey)
	binary.BigEndian.PutUint32(b[12:], m.Size)
}

// readInfo decodes a received message.
func readInfo(b []byte) rdmaInfo {
	return rdmaInfo{Addr: binary.BigEndian.Uint64(b[0:]), RKey: binary.BigEndian.Uint32(b[8:]), Size: binary.BigEndian.Uint32(b[12:])}
}

// The printable bytes of the ping data: 'A' (65) to 'z' (122), then 'A'
// again.
const (
	firstChar = 'A'
	lastChar  = 'z'
)

// nextChar is the character after c in the ping data's cycle.
func nextChar(c byte) byte {
	if c >= lastChar {
		return firstChar
	}
	return c + 1
}

// fillPing writes ping number n into buf as the C client does:
// snprintf(buf, size, "rdma-ping-%d: ", n) (cut short when buf is), then
// from the end of the untruncated text characters starting at start and
// cycling from 'A' to 'z', and a NUL in the last byte.
func fillPing(buf []byte, n int32, start byte) {
	if len(buf) == 0 {
		return
	}
	head := fmt.Sprintf("rdma-ping-%d: ", n)
	k := copy(buf[:len(buf)-1], head)
	buf[k] = 0
	c := start
	for i := len(head); i < len(buf); i++ {
		buf[i] = c
		c = nextChar(c)
	}
	buf[len(buf)-1] = 0
}

// cString is b up to its first NUL, as %s prints a char buffer (all of
// b when it holds none: the C tool would read past it).
func cString(b []byte) []byte {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return b[:i]
	}
	return b
}

// pingLine is what -v prints for the data in buf: the server what it
// read, the client what the server wrote back.
func pingLine(server bool, buf []byte) string {
	if server {
		return "server ping data: " + string(cString(buf)) + "\n"
	}
	return "ping data: " + string(cString(buf)) + "\n"
}
