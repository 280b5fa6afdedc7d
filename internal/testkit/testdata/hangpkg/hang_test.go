// Package hangpkg blocks forever inside the rxevm guest, so the runner's
// test can check that -timeout stops the VM and reports it. Under testdata:
// never part of ./... .
package hangpkg

import (
	"os"
	"os/signal"
	"testing"
)

func TestHang(t *testing.T) {
	if os.Getenv("PUREVERBS_VM") != "1" {
		t.Skip("hangs only inside the rxevm guest")
	}
	t.Log("hanging until the runner's timeout")
	c := make(chan os.Signal, 1)
	signal.Notify(c, os.Interrupt) // keeps the runtime from calling this a deadlock
	<-c
}
