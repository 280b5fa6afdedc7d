package cq_test

// The scale test of docs/performance.md ("Scale"): one process with 100
// open contexts and 1,000 CQs on one completion channel, waited on by a
// bounded number of goroutines while loopback RC QPs on some of the CQs
// carry messages between random pairs. It reports memory, descriptors,
// mappings, threads and goroutines at each stage and the distribution of
// the event latency (post of a send to the waiter having its receive
// completion in hand). The numbers in the document come from
//
//	KERNEL=6.1 make vmtest VMPKGS=./cq RUN=TestVMScale TESTFLAGS='-scale.msgs=5000'
//
// (and the same with KERNEL=6.12).

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/cq"
	"github.com/pureverbs/pureverbs/internal/testkit"
	"github.com/pureverbs/pureverbs/uverbs"
)

var (
	scaleContexts = flag.Int("scale.contexts", 100, "TestVMScale: open contexts (the first holds the channel)")
	scaleCQs      = flag.Int("scale.cqs", 1000, "TestVMScale: CQs on the one completion channel")
	scaleQPs      = flag.Int("scale.qps", 100, "TestVMScale: loopback RC QPs (connected in pairs), each on its own CQ")
	scaleMsgs     = flag.Int("scale.msgs", 1000, "TestVMScale: messages")
	scaleInflight = flag.Int("scale.inflight", 8, "TestVMScale: messages in flight at most")
	scaleWaiters  = flag.Int("scale.waiters", 2, "TestVMScale: waiting goroutines in the uverbs mode (cq.Channel.Wait has one)")
)

// usage is what the process holds at one moment.
type usage struct {
	rssKB, hwmKB int // VmRSS, VmHWM
	threads      int
	fds          int
	maps         int // lines of /proc/self/maps
	goroutines   int
	heapKB       uint64 // runtime: HeapAlloc after a collection (live heap)
	vmallocKB    int    // the kernel's VmallocUsed (the rxe rings), whole VM
}

func takeUsage(t *testing.T) usage {
	t.Helper()
	var u usage
	runtime.GC()
	field := func(text, key string) int {
		for _, l := range strings.Split(text, "\n") {
			if v, ok := strings.CutPrefix(l, key+":"); ok {
				n, _ := strconv.Atoi(strings.Fields(v)[0])
				return n
			}
		}
		return -1
	}
	st, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	u.rssKB, u.hwmKB, u.threads = field(string(st), "VmRSS"), field(string(st), "VmHWM"), field(string(st), "Threads")
	mi, _ := os.ReadFile("/proc/meminfo")
	u.vmallocKB = field(string(mi), "VmallocUsed")
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	u.fds = len(fds) - 1 // the directory's own
	maps, _ := os.ReadFile("/proc/self/maps")
	u.maps = strings.Count(string(maps), "\n")
	u.goroutines = runtime.NumGoroutine()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	u.heapKB = ms.HeapAlloc >> 10
	return u
}

func (u usage) String() string {
	return fmt.Sprintf("RSS %d KiB (peak %d), Go heap %d KiB, %d threads, %d goroutines, %d fds, %d mappings, kernel vmalloc %d KiB",
		u.rssKB, u.hwmKB, u.heapKB, u.threads, u.goroutines, u.fds, u.maps, u.vmallocKB)
}

// scaleLimits names the limits that bound this scale: descriptors (two
// per context, one per channel), mappings (one per CQ, two per QP), and
// the device's CQ and QP counts.
func scaleLimits(t *testing.T, c *uverbs.Context) string {
	t.Helper()
	nofile := "?"
	if b, err := os.ReadFile("/proc/self/limits"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) >= 5 && strings.HasPrefix(l, "Max open files") {
				nofile = f[3] + " (hard " + f[4] + ")"
			}
		}
	}
	mapMax := "?"
	if b, err := os.ReadFile("/proc/sys/vm/max_map_count"); err == nil {
		mapMax = strings.TrimSpace(string(b))
	}
	a, err := c.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("limits: open files %s, vm.max_map_count %s, %s max_cq %d max_qp %d max_cqe %d",
		nofile, mapMax, c.Device().Name, a.MaxCQ, a.MaxQP, a.MaxCQE)
}

// per describes what n objects added between a and b, per object.
func per(a, b usage, n int) string {
	f := func(x, y int) float64 { return float64(y-x) / float64(n) }
	return fmt.Sprintf("per object: RSS %.1f KiB, Go heap %.2f KiB, %.2f fds, %.2f mappings, kernel vmalloc %.1f KiB",
		f(a.rssKB, b.rssKB), f(int(a.heapKB), int(b.heapKB)), f(a.fds, b.fds), f(a.maps, b.maps), f(a.vmallocKB, b.vmallocKB))
}

// scaleRig is the set-up shared by both waiting modes: the contexts, a PD
// on the first, and the QP pairs (created by the mode on its CQs).
type scaleRig struct {
	ctxs []*uverbs.Context
	pd   *uverbs.PD
	qps  []*uverbs.QP
	post []atomic.Int64 // post time (UnixNano) of message i
	lat  []time.Duration
	mu   sync.Mutex // guards lat
	slot chan struct{}
	done atomic.Int64
}

func openContexts(t *testing.T, n int) []*uverbs.Context {
	t.Helper()
	var devs []uverbs.Device
	for _, name := range []string{testkit.RxeDev, testkit.LoopDev} {
		d, err := uverbs.DeviceByName(name)
		if err != nil {
			t.Fatal(err)
		}
		devs = append(devs, d)
	}
	ctxs := make([]*uverbs.Context, 0, n)
	t.Cleanup(func() {
		for _, c := range ctxs {
			c.Close()
		}
	})
	for i := range n {
		c, err := uverbs.Open(devs[i%2]) // rxe0 first: it holds the channel
		if err != nil {
			t.Fatalf("context %d of %d: %v", i+1, n, err)
		}
		ctxs = append(ctxs, c)
	}
	return ctxs
}

// addQPs creates one RC QP per CQ of cqs, connects them in pairs and
// posts receives.
func (r *scaleRig) addQPs(t *testing.T, cqs []*uverbs.CQ) {
	t.Helper()
	c := r.ctxs[0]
	for _, q := range cqs {
		qp, err := r.pd.CreateQP(uverbs.QPInitAttr{Type: uverbs.QPTypeRC, SendCQ: q, RecvCQ: q,
			Cap: uverbs.QPCap{MaxSendWR: 2 * *scaleInflight, MaxRecvWR: 2 * *scaleInflight, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			t.Fatal(err)
		}
		r.qps = append(r.qps, qp)
	}
	t.Cleanup(func() {
		for _, qp := range r.qps {
			qp.Destroy(context.Background())
		}
	})
	for i := 0; i+1 < len(r.qps); i += 2 {
		connect(t, c, r.qps[i], r.qps[i+1].QPN())
		connect(t, c, r.qps[i+1], r.qps[i].QPN())
	}
	for _, qp := range r.qps {
		for k := range 2 * *scaleInflight {
			if err := qp.PostRecv([]uverbs.RecvWR{{ID: uint64(k)}}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// drain polls a CQ into wcs until it is empty and handles every
// completion (for qp).
func (r *scaleRig) drain(qp *uverbs.QP, poll func([]uverbs.WC) (int, error), wcs []uverbs.WC) error {
	for {
		n, err := poll(wcs)
		if err != nil || n == 0 {
			return err
		}
		if err := r.handle(qp, wcs[:n]); err != nil {
			return err
		}
	}
}

// handle consumes the completions of one CQ: a receive ends a message
// (its latency is recorded) and is posted again.
func (r *scaleRig) handle(qp *uverbs.QP, wcs []uverbs.WC) error {
	now := time.Now().UnixNano()
	for _, wc := range wcs {
		if wc.Status != uverbs.WCSuccess {
			return fmt.Errorf("completion %v: %v", wc.Opcode, wc.Status)
		}
		if wc.Opcode != uverbs.WCRecv {
			continue
		}
		d := time.Duration(now - r.post[wc.ImmData].Load())
		r.mu.Lock()
		r.lat = append(r.lat, d)
		r.mu.Unlock()
		if err := qp.PostRecv([]uverbs.RecvWR{{ID: wc.ID}}); err != nil {
			return err
		}
		r.done.Add(1)
		<-r.slot
	}
	return nil
}

// generate sends the messages, each from a random QP to its pair, at most
// scale.inflight at a time.
func (r *scaleRig) generate(ctx context.Context, n int) error {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range n {
		select {
		case r.slot <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		qp := r.qps[rng.IntN(len(r.qps))]
		r.post[i].Store(time.Now().UnixNano())
		if err := qp.PostSend([]uverbs.SendWR{{ID: uint64(i), Opcode: uverbs.WRSendWithImm,
			Flags: uverbs.SendSignaled, ImmData: uint32(i)}}); err != nil {
			return err
		}
	}
	return nil
}

// sampleThreads records the most threads seen until stop is closed.
func sampleThreads(t *testing.T, stop chan struct{}) func() int {
	max := 0
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			if u := takeUsage(t); u.threads > max {
				max = u.threads
			}
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return func() int { wg.Wait(); return max }
}

// tenths times the first and the last tenth of n creations.
type tenths struct {
	n                   int
	start, firstEnd     time.Time
	lastStart, lastStop time.Time
}

func newTenths(n int) *tenths { return &tenths{n: n} }

// mark is called before creation i (and once more with i = n at the end).
func (x *tenths) mark(i int) {
	k := max(1, x.n/10)
	switch {
	case i == 0:
		x.start = time.Now()
	case i == k:
		x.firstEnd = time.Now()
	case i == x.n-k:
		x.lastStart = time.Now()
	case i == x.n:
		x.lastStop = time.Now()
	}
}

func (x *tenths) String(what string) string {
	x.mark(x.n)
	k := time.Duration(max(1, x.n/10))
	return fmt.Sprintf("%-34s first %d: %v each, last %d: %v each", what+":", k,
		(x.firstEnd.Sub(x.start) / k).Round(time.Microsecond), k, (x.lastStop.Sub(x.lastStart) / k).Round(time.Microsecond))
}

func percentiles(d []time.Duration) string {
	if len(d) == 0 {
		return "none"
	}
	s := slices.Clone(d)
	slices.Sort(s)
	p := func(q float64) time.Duration { return s[min(len(s)-1, int(q*float64(len(s))))].Round(time.Microsecond) }
	return fmt.Sprintf("p50 %v, p90 %v, p99 %v, max %v", p(0.50), p(0.90), p(0.99), s[len(s)-1].Round(time.Microsecond))
}

// TestVMScale: 100 contexts, 1,000 CQs on one completion channel of the
// first, loopback QPs on 100 of them, messages between random pairs; the
// waiting is done by cq.Channel.Wait in one goroutine ("cq"), then, on a
// fresh set of CQs, by uverbs.CompChannel.GetCQEvent in scale.waiters
// goroutines ("uverbs"). Every message must arrive; descriptors must not
// grow with the CQs (they share the channel's), threads must stay bounded
// (waiters park on the runtime poller, not on threads).
func TestVMScale(t *testing.T) {
	testkit.RequireVM(t)
	if *scaleQPs%2 != 0 || *scaleQPs > *scaleCQs {
		t.Fatalf("-scale.qps %d must be even and at most -scale.cqs %d", *scaleQPs, *scaleCQs)
	}
	for _, mode := range []string{"cq", "uverbs"} {
		t.Run(mode, func(t *testing.T) { scaleRun(t, mode) })
	}
}

func scaleRun(t *testing.T, mode string) {
	report := []string{fmt.Sprintf("kernel %s, GOMAXPROCS %d", testkit.KernelRelease(), runtime.GOMAXPROCS(0))}
	var prev usage
	stage := func(name string, t0 time.Time, n int) usage {
		d := time.Since(t0)
		u := takeUsage(t)
		line := fmt.Sprintf("%-34s %s (%v)", name+":", u, d.Round(time.Millisecond))
		if n > 0 {
			line += fmt.Sprintf("\n%-34s %s; %v each", "", per(prev, u, n), (d / time.Duration(n)).Round(time.Microsecond))
		}
		report = append(report, line)
		prev = u
		return u
	}
	u0 := stage("start", time.Now(), 0)
	t0 := time.Now()
	r := &scaleRig{ctxs: openContexts(t, *scaleContexts), post: make([]atomic.Int64, *scaleMsgs),
		slot: make(chan struct{}, *scaleInflight)}
	u1 := stage(fmt.Sprintf("%d contexts open", *scaleContexts), t0, *scaleContexts)
	c := r.ctxs[0]
	report = append(report, scaleLimits(t, c))
	var err error
	if r.pd, err = c.AllocPD(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.pd.Dealloc() })

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var wait func(ctx context.Context) error // one waiter's loop
	waiters := 1
	t0 = time.Now()
	switch mode {
	case "cq":
		ch, err := cq.NewChannel(c)
		if err != nil {
			t.Fatal(err)
		}
		qs := make([]*cq.CQ, 0, *scaleCQs)
		t.Cleanup(func() {
			for _, q := range qs {
				q.Close(context.Background())
			}
			ch.Close()
		})
		qpOf := map[*cq.CQ]int{}
		tenth := newTenths(*scaleCQs)
		for i := range *scaleCQs {
			tenth.mark(i)
			q, err := cq.New(c, 4**scaleInflight+4, &cq.Options{Channel: ch})
			if err != nil {
				t.Fatalf("CQ %d of %d: %v", i+1, *scaleCQs, err)
			}
			qs = append(qs, q)
		}
		report = append(report, tenth.String("cq.New"))
		stage(fmt.Sprintf("%d CQs on one cq.Channel", *scaleCQs), t0, *scaleCQs)
		t0 = time.Now()
		vcqs := make([]*uverbs.CQ, *scaleQPs)
		for i := range vcqs {
			// Spread the busy CQs over the channel's CQs.
			k := i * (*scaleCQs / *scaleQPs)
			vcqs[i] = qs[k].Verbs()
			qpOf[qs[k]] = i
		}
		r.addQPs(t, vcqs)
		wcs := make([]uverbs.WC, 16)
		wait = func(ctx context.Context) error {
			for r.done.Load() < int64(*scaleMsgs) {
				q, err := ch.Wait(ctx)
				if err != nil {
					return err
				}
				if err := r.drain(r.qps[qpOf[q]], q.GetWC, wcs); err != nil {
					return err
				}
			}
			return nil
		}
	case "uverbs":
		ch, err := c.CreateCompChannel()
		if err != nil {
			t.Fatal(err)
		}
		cqs := make([]*uverbs.CQ, 0, *scaleCQs)
		t.Cleanup(func() {
			for _, q := range cqs {
				q.Destroy(context.Background())
			}
			ch.Close()
		})
		qpOf := map[*uverbs.CQ]int{}
		tenth := newTenths(*scaleCQs)
		for i := range *scaleCQs {
			tenth.mark(i)
			q, err := c.CreateCQ(4**scaleInflight+4, &uverbs.CQOptions{Channel: ch})
			if err != nil {
				t.Fatalf("CQ %d of %d: %v", i+1, *scaleCQs, err)
			}
			if err := q.ReqNotify(false); err != nil {
				t.Fatal(err)
			}
			cqs = append(cqs, q)
		}
		report = append(report, tenth.String("CreateCQ+ReqNotify"))
		stage(fmt.Sprintf("%d CQs on one CompChannel", *scaleCQs), t0, *scaleCQs)
		t0 = time.Now()
		busy := make([]*uverbs.CQ, *scaleQPs)
		for i := range busy {
			busy[i] = cqs[i*(*scaleCQs / *scaleQPs)]
			qpOf[busy[i]] = i
		}
		r.addQPs(t, busy)
		waiters = *scaleWaiters
		wait = func(ctx context.Context) error {
			wcs := make([]uverbs.WC, 16)
			for r.done.Load() < int64(*scaleMsgs) {
				q, err := ch.GetCQEvent(ctx)
				if err != nil {
					return err
				}
				if err := q.AckEvents(1); err != nil {
					return err
				}
				// Arm, then poll: a completion that came before the
				// arm is polled now, one after it raises an event.
				if err := q.ReqNotify(false); err != nil {
					return err
				}
				if err := r.drain(r.qps[qpOf[q]], q.Poll, wcs); err != nil {
					return err
				}
			}
			return nil
		}
	}
	u3 := stage(fmt.Sprintf("%d QPs on %d of the CQs", *scaleQPs, *scaleQPs), t0, *scaleQPs)

	stop := make(chan struct{})
	maxThreads := sampleThreads(t, stop)
	t0 = time.Now()
	wctx, wcancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	errs := make([]error, waiters+1)
	for w := range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := wait(wctx); err != nil && wctx.Err() == nil {
				errs[w] = err
				wcancel()
			}
		}()
	}
	during := takeUsage(t)
	errs[waiters] = r.generate(wctx, *scaleMsgs)
	// The last waiter to see all messages returns; the others are parked
	// in their wait: end them.
	for r.done.Load() < int64(*scaleMsgs) && wctx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
	elapsed := time.Since(t0)
	wcancel()
	wg.Wait()
	close(stop)
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := r.done.Load(); got != int64(*scaleMsgs) {
		t.Fatalf("%d of %d messages arrived", got, *scaleMsgs)
	}
	report = append(report, fmt.Sprintf("%-34s %s", fmt.Sprintf("waiting (%d waiters):", waiters), during),
		fmt.Sprintf("%d messages in %v (%.0f/s), at most %d threads while waiting; event latency %s",
			*scaleMsgs, elapsed.Round(time.Millisecond), float64(*scaleMsgs)/elapsed.Seconds(), maxThreads(), percentiles(r.lat)))
	t.Logf("%s\n%s", mode, strings.Join(report, "\n"))

	// The CQs share the channel's descriptor: the contexts own 2 each
	// (command and async fds), the channel 1, the CQs and QPs none.
	if d := u1.fds - u0.fds; d != 2**scaleContexts {
		t.Errorf("%d contexts opened %d descriptors, want %d", *scaleContexts, d, 2**scaleContexts)
	}
	if d := u3.fds - u1.fds; d > 2 {
		t.Errorf("%d CQs and %d QPs opened %d descriptors (want the channel's 1)", *scaleCQs, *scaleQPs, d)
	}
	if during.threads > 16 {
		t.Errorf("%d threads while %d goroutines wait (want them parked on the poller, not on threads)", during.threads, waiters)
	}
}
