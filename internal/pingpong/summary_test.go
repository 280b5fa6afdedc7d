package pingpong

import (
	"testing"
	"time"
)

// cSummaries is the output of testdata/cgolden/golden.c: the summary
// lines as the C tools compute and print them (float usec, %.2f).
var cSummaries = []struct {
	size, iters uint32
	usec        int64
	out         string
}{
	{4096, 1000, 123456, "8192000 bytes in 0.12 seconds = 530.84 Mbit/sec\n1000 iters in 0.12 seconds = 123.46 usec/iter\n"},
	{1, 1000, 98765, "2000 bytes in 0.10 seconds = 0.16 Mbit/sec\n1000 iters in 0.10 seconds = 98.76 usec/iter\n"},
	{65536, 1000, 3456789, "131072000 bytes in 3.46 seconds = 303.34 Mbit/sec\n1000 iters in 3.46 seconds = 3456.79 usec/iter\n"},
	{64, 100000, 16777217, "12800000 bytes in 16.78 seconds = 6.10 Mbit/sec\n100000 iters in 16.78 seconds = 167.77 usec/iter\n"},
	{64, 1000, 0, "128000 bytes in 0.00 seconds = inf Mbit/sec\n1000 iters in 0.00 seconds = 0.00 usec/iter\n"},
	{4096, 0, 0, "0 bytes in 0.00 seconds = -nan Mbit/sec\n0 iters in 0.00 seconds = -nan usec/iter\n"},
	{4096, 0, 1500, "0 bytes in 0.00 seconds = 0.00 Mbit/sec\n0 iters in 0.00 seconds = inf usec/iter\n"},
	{1024, 3, 7, "6144 bytes in 0.00 seconds = 7021.71 Mbit/sec\n3 iters in 0.00 seconds = 2.33 usec/iter\n"},
	{4294967295, 2, 1000001, "17179869180 bytes in 1.00 seconds = 137438.82 Mbit/sec\n2 iters in 1.00 seconds = 500000.50 usec/iter\n"},
	{4096, 5000, 125, "40960000 bytes in 0.00 seconds = 2621440.00 Mbit/sec\n5000 iters in 0.00 seconds = 0.03 usec/iter\n"},
	{17, 999, 33333335, "33966 bytes in 33.33 seconds = 0.01 Mbit/sec\n999 iters in 33.33 seconds = 33366.70 usec/iter\n"},
}

func TestSummaryAgainstC(t *testing.T) {
	for _, c := range cSummaries {
		usec := Micros(time.Duration(c.usec) * time.Microsecond)
		if got := Summary(c.size, c.iters, usec); got != c.out {
			t.Errorf("Summary(%d, %d, %d us):\n got %q\nwant %q", c.size, c.iters, c.usec, got, c.out)
		}
	}
}

func TestParseSummary(t *testing.T) {
	r, err := ParseSummary("  local address: ...\r\n" + cSummaries[0].out)
	if err != nil {
		t.Fatal(err)
	}
	if r.Bytes != 8192000 || r.Iters != 1000 || r.Seconds != 0.12 || r.MbitPerSec != 530.84 || r.USecPerIter != 123.46 {
		t.Errorf("ParseSummary = %+v", r)
	}
	// A pty turns \n into \r\n.
	if _, err := ParseSummary("8 bytes in 0.00 seconds = 1.00 Mbit/sec\r\n4 iters in 0.00 seconds = 0.25 usec/iter\r\n"); err != nil {
		t.Error(err)
	}
	if _, err := ParseSummary("nothing here\n"); err == nil {
		t.Error("ParseSummary found a summary in nothing")
	}
}
