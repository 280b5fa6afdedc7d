package uverbs

import (
	"fmt"
	"os"
	"testing"

	"github.com/pureverbs/pureverbs/internal/sys"
)

// TestMain traces every fd and mapping the tests create and fails the run
// when any is left open.
func TestMain(m *testing.M) {
	sys.EnableLeakTracing()
	code := m.Run()
	if r := sys.LeakReport(); r != "" && code == 0 {
		fmt.Fprintln(os.Stderr, r)
		code = 1
	}
	os.Exit(code)
}
