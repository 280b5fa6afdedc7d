package sys

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// TestNewFDNegative: a negative descriptor is refused with an error that
// matches unix.EBADF, by NewFD and NewFDKind alike.
func TestNewFDNegative(t *testing.T) {
	if fd, err := NewFD(-1, "x"); fd != nil || !errors.Is(err, unix.EBADF) {
		t.Errorf("NewFD(-1) = %v, %v, want EBADF", fd, err)
	}
	if fd, err := NewFDKind(-2, "rxe0", "async events"); fd != nil || !errors.Is(err, unix.EBADF) {
		t.Errorf("NewFDKind(-2) = %v, %v, want EBADF", fd, err)
	}
}
