package devx

import (
	"errors"
	"fmt"

	"github.com/pureverbs/pureverbs/internal/sys"
	"github.com/pureverbs/pureverbs/uverbs"
)

var (
	// ErrNoEvent is returned by TryGet and TryGetEvent when nothing is
	// queued. It matches unix.EAGAIN.
	ErrNoEvent error = noEvent{}
	// ErrOverflow is returned once by GetEvent after the kernel dropped
	// events it had no memory for (on a channel with event data); the
	// channel keeps working. It matches unix.EOVERFLOW.
	ErrOverflow error = overflow{}
	// ErrShortRecord is returned for a record shorter than its header, or
	// a read that ends inside a record. It matches uverbs.ErrInvalid and
	// unix.EINVAL (libmlx5's answer to a short read).
	ErrShortRecord error = shortRec{}
)

type noEvent struct{}

func (noEvent) Error() string   { return "devx: no event queued" }
func (noEvent) Is(t error) bool { return t == sys.EAGAIN }

type overflow struct{}

func (overflow) Error() string {
	return "devx: events were lost (the kernel had no memory to queue them)"
}
func (overflow) Is(t error) bool { return t == sys.EOVERFLOW }

type shortRec struct{}

func (shortRec) Error() string   { return "devx: short record" }
func (shortRec) Is(t error) bool { return t == sys.EINVAL || t == uverbs.ErrInvalid }

// shortRecErr is ErrShortRecord with the lengths (built on the error path
// only).
type shortRecErr struct {
	what    string
	n, want int
}

func (s shortRecErr) Error() string {
	return fmt.Sprintf("devx: short %s record: %d bytes, want at least %d", s.what, s.n, s.want)
}

func (shortRecErr) Is(t error) bool {
	return t == ErrShortRecord || t == sys.EINVAL || t == uverbs.ErrInvalid
}

func shortRecord(what string, n, want int) error { return shortRecErr{what, n, want} }

func isClosed(err error) bool { return errors.Is(err, uverbs.ErrClosed) }
