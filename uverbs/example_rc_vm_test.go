package uverbs_test

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/testkit"
	"github.com/pureverbs/pureverbs/uverbs"
)

// TestVMExampleRC runs the package's whole-file example (rcLoopback in
// example_rc_test.go) on both single-host devices, so that the code users
// copy is the code that works: the message arrives whole, and the
// device's resource counts are back after it (with the leak checks of
// TestMain: fds, mappings, goroutines). Its failures are errors, not
// panics: an unknown device, a message larger than its half page.
func TestVMExampleRC(t *testing.T) {
	testkit.RequireVM(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	msg := bytes.Repeat([]byte("pureverbs "), 200) // 2000 B: two packets at MTU 1024
	for _, dev := range []string{testkit.RxeDev, testkit.LoopDev} {
		before := testkit.Resources(t, dev)
		got, err := rcLoopback(ctx, dev, msg)
		if err != nil || !bytes.Equal(got, msg) {
			t.Errorf("%s: rcLoopback: %d bytes (equal %v), %v", dev, len(got), bytes.Equal(got, msg), err)
		}
		if after := testkit.Resources(t, dev); !maps.Equal(after, before) {
			t.Errorf("%s: resources after %v, before %v", dev, after, before)
		}
	}
	if _, err := rcLoopback(ctx, "nosuchdev0", msg); !errors.Is(err, uverbs.ErrNoDevice) {
		t.Errorf("unknown device: %v, want ErrNoDevice", err)
	}
	before := testkit.Resources(t, testkit.RxeDev)
	if _, err := rcLoopback(ctx, testkit.RxeDev, make([]byte, 3000)); err == nil || !strings.Contains(err.Error(), "at most 2048") {
		t.Errorf("3000-byte message: %v, want a refusal naming 2048", err)
	}
	if after := testkit.Resources(t, testkit.RxeDev); !maps.Equal(after, before) {
		t.Errorf("after the refusal: resources %v, before %v", after, before)
	}
}
