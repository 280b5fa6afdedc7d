//go:build !amd64

package bw

const haveTSC = false

func rdtsc() uint64 { return 0 }
