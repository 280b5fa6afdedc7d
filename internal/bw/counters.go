package bw

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
)

// counterRoot is perftest's COUNTER_PATH without the counter: the port's
// directory in sysfs.
const counterRoot = "/sys/class/infiniband/%s/ports/%d/"

// counterValueMax is perftest's COUNTER_VALUE_MAX_LEN: how much of a
// counter file it reads.
const counterValueMax = 21

// counters is perftest's counter_context (-W): the port's sysfs counters,
// opened before the connection set-up and read again after each result
// line, which is followed by each counter's change since the read before.
type counters struct {
	names      []string
	files      []*os.File
	prev, last []uint64
	buf        [counterValueMax]byte
}

var errNoCounter = errors.New("no such counter")

// counterNames is perftest's reading of the -W list: as many counters as
// the commas say (none for an empty list), named by the list's non-empty
// fields in turn (strtok). A counter that finds no field left has no
// name: perftest looks it up as "(null)" and cannot open it, so ok is
// false.
func counterNames(list string) (names []string, ok bool) {
	n := strings.Count(list, ",")
	if list != "" {
		n++
	}
	fields := strings.FieldsFunc(list, func(r rune) bool { return r == ',' })
	if len(fields) < n {
		return fields, false
	}
	return fields[:n], true
}

// portDir is the sysfs directory of device dev's port, where perftest
// looks for counters.
func portDir(dev string, port int) string { return fmt.Sprintf(counterRoot, dev, port) }

// openCounters is perftest's counters_open: each counter of list under
// dir (portDir), opened through symbolic links (as realpath resolves
// them) and read once.
func openCounters(dir, list string) (*counters, error) {
	names, ok := counterNames(list)
	c := &counters{}
	for _, name := range names {
		path, err := filepath.EvalSymlinks(dir + name)
		if err != nil {
			c.close()
			return nil, err
		}
		f, err := os.Open(path)
		if err != nil {
			c.close()
			return nil, err
		}
		c.names = append(c.names, name)
		c.files = append(c.files, f)
	}
	if !ok {
		c.close()
		return nil, errNoCounter
	}
	c.prev, c.last = make([]uint64, len(c.files)), make([]uint64, len(c.files))
	if err := c.read(); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

// read is counters_read: each counter's value moves to prev and the
// file's new value to last, up to the first file that cannot be read.
func (c *counters) read() error {
	for i, f := range c.files {
		n, err := f.ReadAt(c.buf[:], 0)
		if err != nil && err != io.EOF {
			return err
		}
		c.prev[i] = c.last[i]
		c.last[i] = uint64(strtoll(c.buf[:n]))
	}
	return nil
}

// print is counters_print: read the counters again and print each one's
// change, then an empty line. perftest ignores a failed read here.
func (c *counters) print(w io.Writer) {
	c.read()
	for i, name := range c.names {
		fmt.Fprintf(w, "\t%s=%d\n", name, c.last[i]-c.prev[i])
	}
	io.WriteString(w, "\n")
}

func (c *counters) close() {
	for _, f := range c.files {
		f.Close()
	}
	c.files = nil
}

// strtoll is C's strtoll(b, NULL, 10): leading white space, a sign, the
// digits that follow (0 if none), clamped to the range of a long long.
func strtoll(b []byte) int64 {
	s := strings.TrimLeft(string(b), " \t\n\v\f\r")
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-'
		s = s[1:]
	}
	var v uint64
	over := false
	for i := 0; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		d := uint64(s[i] - '0')
		if v > (math.MaxUint64-d)/10 {
			over = true
			break
		}
		v = v*10 + d
	}
	switch {
	case neg && (over || v > 1<<63):
		return math.MinInt64
	case neg:
		return -int64(v)
	case over || v > math.MaxInt64:
		return math.MaxInt64
	}
	return int64(v)
}
