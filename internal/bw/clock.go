package bw

import (
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/pureverbs/pureverbs/internal/sys"
)

// The loops' clock. perftest stamps every post and completion with the
// TSC (get_cycles) and converts with a frequency it calibrates. The Go
// tools read the TSC too where the kernel itself keeps time with it
// (clocksource "tsc"): the vDSO's clock_gettime is then that same TSC
// read plus about 80 instructions of seqlock and scaling, which QEMU's TCG
// turns into a quarter of a microsecond per message (callgrind in the
// guest: docs/performance.md). The ticks are converted to nanoseconds
// after the run, at the rate the TSC advanced against the monotonic clock
// since the process started (milliseconds at least: connection set-up
// comes first), so no calibration pause is needed. Elsewhere (another
// clocksource, another architecture, no /sys) the loops read the
// monotonic clock directly.

var (
	epoch = time.Now()
	// useTSC: stamps are TSC ticks, converted by ticksToNanos.
	useTSC = haveTSC && tscClocksource()
	// tsc0 and mono0 are one reading of both clocks at start-up.
	tsc0, mono0 = startReading()
)

// nanotime is the monotonic clock in nanoseconds since the process
// started (time.Since reads the vDSO clock and allocates nothing).
func nanotime() int64 { return int64(time.Since(epoch)) }

// stamp is the loops' timestamp: TSC ticks with useTSC, else nanotime.
func stamp() int64 {
	if useTSC {
		return int64(rdtsc())
	}
	return nanotime()
}

func startReading() (uint64, int64) {
	if !useTSC {
		return 0, 0
	}
	return rdtsc(), nanotime()
}

func tscClocksource() bool {
	b, err := os.ReadFile("/sys/devices/system/clocksource/clocksource0/current_clocksource")
	return err == nil && strings.TrimSpace(string(b)) == "tsc"
}

// toNanos turns the stamps in ts into nanoseconds since the process
// started, in place; zero (a stamp never taken) stays zero. Without
// useTSC the stamps are nanoseconds already.
func toNanos(ts ...[]int64) {
	if !useTSC {
		return
	}
	tsc1, mono1 := rdtsc(), nanotime()
	ticks := float64(tsc1 - tsc0)
	if tsc1 <= tsc0 || mono1 <= mono0 {
		ticks = 1 // cannot happen with the kernel's own clocksource; keep the stamps ordered
	}
	nsPerTick := float64(mono1-mono0) / ticks
	for _, s := range ts {
		for i, t := range s {
			if t != 0 {
				s[i] = mono0 + int64(float64(uint64(t)-tsc0)*nsPerTick)
			}
		}
	}
}

// stampsPer is d in stamp units: nanoseconds, or TSC ticks at the rate
// the TSC has advanced against the monotonic clock since start-up. With
// less than a millisecond to go on it assumes 4 GHz: on a slower TSC the
// yielder's 2 ms then last longer, 8 ms at 1 GHz, still under sysmon's
// 10 ms.
func stampsPer(d time.Duration) int64 {
	if !useTSC {
		return int64(d)
	}
	tsc1, mono1 := rdtsc(), nanotime()
	if mono1-mono0 < int64(time.Millisecond) || tsc1 <= tsc0 {
		return int64(d) * 4
	}
	return int64(float64(d) * float64(tsc1-tsc0) / float64(mono1-mono0))
}

// yieldEvery is how often the loops hand their P to the scheduler.
// sysmon preempts a goroutine that has run 10 ms without a scheduling
// point with a signal (and, with an idle P, wakes another thread to take
// it over); a loop that never blocks passes one itself well before that.
const yieldEvery = 2 * time.Millisecond

// yielder lets a busy loop pass a scheduling point every yieldEvery, so
// that the runtime never needs to preempt it: the tools run their loop
// on one P (OneProc), where the other goroutines (the -D clock, the
// watchdog, the report printer, signals, and the watch of the peer,
// parked on the runtime poller: sys.Yield) run at those points.
type yielder struct {
	next, every int64
	calls       int    // check's calls since it last read the clock
	yield       func() // sys.Yield; tests count
	// peer, when set, is the watch on the peer's connection: the loops
	// ask peerLost after a yield.
	peer *peerWatch
}

// yieldCheck is how many calls of check share one read of the clock.
// The loops call check at every turn and poll; 64 of them are short
// against the 2 ms interval even when each poll finds a full batch, so
// a yield still comes well before sysmon's 10 ms. Under TCG a guest's
// RDTSC is a call into QEMU's clock code, not an instruction, and
// reading it at every spin (which perftest's loops do not) cost the
// two-host sendbw runs about a tenth of their rate (docs/performance.md,
// "The clock in the spin").
const yieldCheck = 64

// check is at(stamp()) for the spinning parts of the loops: it reads the
// clock only every yieldCheck calls.
func (y *yielder) check() bool {
	y.calls++
	if y.calls < yieldCheck {
		return false
	}
	y.calls = 0
	return y.at(stamp())
}

// reset starts an interval now (of yieldEvery, unless a test set
// another).
func (y *yielder) reset() {
	if y.every == 0 {
		y.every = stampsPer(yieldEvery)
	}
	y.next, y.calls = stamp()+y.every, 0
}

// at yields when now (a stamp) has passed the end of the interval, and
// says whether it did.
func (y *yielder) at(now int64) bool {
	if now < y.next {
		return false
	}
	if y.yield != nil {
		y.yield()
	} else {
		// Not runtime.Gosched alone: it would not let the watch of the
		// peer (parked on the poller) run (sys.Yield).
		sys.Yield()
	}
	y.next = now + y.every
	return true
}

// peerLost says whether the peer's connection has been gone for
// peerGoneGrace (peerWatch). A loop that waits for the peer asks it each
// time check yields: an atomic load every 2 ms.
func (y *yielder) peerLost() bool {
	return y.peer != nil && y.peer.expired.Load()
}

// OneProc runs the tool's goroutines on one P, as perftest runs on one
// thread, unless GOMAXPROCS is set in the environment. The timed loops
// are one goroutine each; a second P only lets the runtime move that
// goroutine between threads at each preemption (docs/performance.md).
func OneProc() {
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
}

// gapSpin is perftest's --latency_gap: spin for gap stamp units (0: no
// gap) before a post, yielding as the loops' spins do.
func gapSpin(gap int64, y *yielder) {
	if gap <= 0 {
		return
	}
	end := stamp() + gap
	for now := stamp(); now < end; now = stamp() {
		y.at(now)
	}
}

// gapStamps is --latency_gap's microseconds in stamp units.
func gapStamps(us int) int64 {
	if us <= 0 {
		return 0
	}
	return stampsPer(time.Duration(us) * time.Microsecond)
}
