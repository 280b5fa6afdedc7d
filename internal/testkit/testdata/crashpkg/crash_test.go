// Package crashpkg panics the guest kernel (sysrq c) inside the rxevm guest,
// so the runner's test can check that a dead guest is reported with its
// console tail. Under testdata: never part of ./... .
package crashpkg

import (
	"os"
	"testing"
)

func TestCrashKernel(t *testing.T) {
	if os.Getenv("PUREVERBS_VM") != "1" {
		t.Skip("crashes only the rxevm guest")
	}
	if err := os.WriteFile("/proc/sysrq-trigger", []byte("c"), 0); err != nil {
		t.Fatal(err)
	}
	t.Fatal("still alive after sysrq c")
}
