package cmsync

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/rdmacm"
	"github.com/pureverbs/pureverbs/uverbs"
)

// TestPerror: perror(3)'s lines as glibc words them: an errno anywhere
// in the chain, EINVAL for an argument the library refused (rdmacm's and
// uverbs's ErrInvalid), "Unknown error N" for an errno glibc has no text
// for (the kernel's ENOTSUPP, 524), and the whole error when there is no
// errno at all.
func TestPerror(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("x: %w", sys.ECONNREFUSED), "what: Connection refused\n"},
		{fmt.Errorf("x: %w", uverbs.ErrInvalid), "what: Invalid argument\n"},
		{fmt.Errorf("x: %w", rdmacm.ErrInvalid), "what: Invalid argument\n"},
		{sys.Errno(524), "what: Unknown error 524\n"},
		{errors.New("no errno"), "what: no errno\n"},
	} {
		var b bytes.Buffer
		Perror(&b, "what", c.err)
		if b.String() != c.want {
			t.Errorf("Perror(%v): %q, want %q", c.err, b.String(), c.want)
		}
	}
	if ErrnoValue(errors.New("none")) != 1 || ErrnoValue(sys.EAGAIN) != int(sys.EAGAIN) {
		t.Error("ErrnoValue")
	}
}
