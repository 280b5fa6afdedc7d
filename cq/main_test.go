package cq_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/pureverbs/pureverbs/internal/sys"
)

func TestMain(m *testing.M) {
	sys.EnableLeakTracing()
	code := m.Run()
	if code == 0 {
		if r := sys.LeakReport(); r != "" {
			fmt.Fprintln(os.Stderr, r)
			code = 1
		}
	}
	os.Exit(code)
}
