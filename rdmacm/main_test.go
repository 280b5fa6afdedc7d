package rdmacm_test

import (
	"os"
	"testing"

	"github.com/pureverbs/pureverbs/internal/testkit/leakmain"
)

// TestMain traces every fd and mapping the tests create and fails the run
// when any is left open; in the VM each test is also checked on its own.
func TestMain(m *testing.M) {
	os.Exit(leakmain.Run(m))
}
