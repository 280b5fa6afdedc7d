package main

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pureverbs/pureverbs/internal/pingpong/pptest"
	"github.com/pureverbs/pureverbs/internal/testkit"
)

// knownDifferences lists the fields (as parseDevinfo names them, with the
// device and port part replaced by "*") whose values may legitimately
// differ between ibv_devinfo and devinfo, with the reason. It is empty: every
// field both print must agree.
var knownDifferences = map[string]string{}

// fieldRe splits "key:<tabs>value" (value optional).
var fieldRe = regexp.MustCompile(`^([^:\t]+):\t*(.*)$`)

// parseDevinfo turns ibv_devinfo output into a flat map of fields:
//
//	"rxe0/node_guid"                    device field
//	"rxe0/tso_caps/max_tso"             field under a section header
//	"rxe0/port1/state"                  port field
//	"rxe0/port1/GID[1]"                 GID table entry
//	"rxe0/device_cap_flags"             "0x01223c76 +BAD_PKEY_CNTR +..."
//
// Flag lines (five tabs, listed under the field or header before them) are
// appended to that field's value. Lines without a colon ("tag matching not
// supported") are fields with an empty value.
func parseDevinfo(t *testing.T, out string) map[string]string {
	t.Helper()
	fields := map[string]string{}
	var dev, port, section, last string
	for _, raw := range strings.Split(strings.ReplaceAll(out, "\r", ""), "\n") {
		if strings.TrimSpace(raw) == "" {
			continue
		}
		indent := len(raw) - len(strings.TrimLeft(raw, "\t"))
		line := strings.TrimSpace(raw)
		if indent == 5 {
			if last == "" {
				t.Fatalf("flag line %q before any field in:\n%s", line, out)
			}
			fields[last] += " +" + line
			continue
		}
		key, val := line, ""
		if m := fieldRe.FindStringSubmatch(line); m != nil {
			key, val = m[1], strings.TrimSpace(m[2])
		}
		if strings.HasPrefix(key, "GID[") {
			key = "GID[" + strings.TrimSpace(strings.TrimPrefix(key, "GID[")) // "GID[  1]" -> "GID[1]"
		}
		switch {
		case indent == 0 && key == "hca_id":
			dev, port, section = val, "", ""
			last = ""
			continue
		case dev == "":
			t.Fatalf("line %q before any hca_id in:\n%s", line, out)
		case indent == 2 && key == "port":
			port, section = "port"+val, ""
			last = ""
			continue
		}
		path := dev + "/"
		switch {
		case port != "":
			path += port + "/"
		case indent == 1:
			section = ""
			if val == "" && strings.HasSuffix(line, ":") {
				section = key // a header such as "tso_caps:"
			}
		case indent >= 2 && section != "":
			path += section + "/"
		}
		path += key
		if _, dup := fields[path]; dup {
			t.Fatalf("field %s twice in:\n%s", path, out)
		}
		fields[path] = val
		last = path
	}
	return fields
}

// wildcard replaces the device and port parts of a field path with "*".
func wildcard(path string) string {
	parts := strings.Split(path, "/")
	parts[0] = "*"
	if len(parts) > 2 && strings.HasPrefix(parts[1], "port") {
		parts[1] = "*"
	}
	return strings.Join(parts, "/")
}

// compareFields reports every field whose value differs and every field
// only one side prints, unless knownDifferences excuses it.
func compareFields(t *testing.T, want, got map[string]string) {
	t.Helper()
	keys := make([]string, 0, len(want)+len(got))
	for k := range want {
		keys = append(keys, k)
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		w, inWant := want[k]
		g, inGot := got[k]
		if inWant && inGot && w == g {
			continue
		}
		if why, ok := knownDifferences[wildcard(k)]; ok {
			t.Logf("%s differs (known: %s): ibv_devinfo %q, devinfo %q", k, why, w, g)
			continue
		}
		switch {
		case !inGot:
			t.Errorf("%s: ibv_devinfo prints %q, devinfo does not print it", k, w)
		case !inWant:
			t.Errorf("%s: devinfo prints %q, ibv_devinfo does not print it", k, g)
		default:
			t.Errorf("%s: ibv_devinfo %q, devinfo %q", k, w, g)
		}
	}
}

// runBoth runs ibv_devinfo and devinfo (in process) with args.
func runBoth(ctx context.Context, t *testing.T, args ...string) (want, got string) {
	t.Helper()
	want, err := testkit.RunPeer(ctx, t, "ibv_devinfo", args...)
	if err != nil {
		t.Fatalf("ibv_devinfo %s: %v\n%s", strings.Join(args, " "), err, want)
	}
	want = strings.ReplaceAll(want, "\r", "")
	var out, errb bytes.Buffer
	if rc := run("devinfo", args, &out, &errb); rc != 0 {
		t.Fatalf("devinfo %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), rc, out.String(), errb.String())
	}
	if errb.Len() != 0 {
		t.Errorf("devinfo %s wrote to stderr: %s", strings.Join(args, " "), errb.String())
	}
	return want, out.String()
}

func TestVMCompareWithIbvDevinfo(t *testing.T) {
	testkit.RequireVM(t)
	t.Logf("kernel %s", testkit.KernelRelease())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	for _, args := range [][]string{
		{"-d", testkit.RxeDev},
		{"-d", testkit.LoopDev},
		{"-v", "-d", testkit.RxeDev},
		{"-v", "-d", testkit.LoopDev},
		{"-d", testkit.RxeDev, "-i", "1"},
		{"-v"},
		{},
	} {
		t.Run(strings.Join(append([]string{"args"}, args...), " "), func(t *testing.T) {
			want, got := runBoth(ctx, t, args...)
			wf, gf := parseDevinfo(t, want), parseDevinfo(t, got)
			if len(wf) == 0 {
				t.Fatalf("no fields parsed from ibv_devinfo output:\n%s", want)
			}
			compareFields(t, wf, gf)
			if want != got && len(knownDifferences) == 0 && !t.Failed() {
				// Same fields and values, and devices in the same order
				// (libibverbs'): the text must then be identical too.
				t.Errorf("same fields but different text:\nibv_devinfo:\n%s\ndevinfo:\n%s", want, got)
			}
			if t.Failed() {
				t.Logf("ibv_devinfo %s:\n%s\ndevinfo:\n%s", strings.Join(args, " "), want, got)
			}
		})
	}
}

func TestVMList(t *testing.T) {
	testkit.RequireVM(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	want, got := runBoth(ctx, t, "-l")
	// Same header, same devices in the same order (libibverbs'), same text.
	if want != got {
		t.Errorf("devinfo -l differs from ibv_devinfo -l:\nibv_devinfo:\n%s\ndevinfo:\n%s", want, got)
	}
	if l := listed(got); !slices.Contains(l, testkit.RxeDev) || !slices.Contains(l, testkit.LoopDev) {
		t.Errorf("devinfo -l lists %q, want %s and %s", l, testkit.RxeDev, testkit.LoopDev)
	}
	if !strings.HasSuffix(got, "\n\n") {
		t.Errorf("devinfo -l output does not end with an empty line: %q", got)
	}
}

// listed returns the device names of -l output, in order.
func listed(out string) []string {
	var names []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		names = append(names, strings.TrimSpace(l))
	}
	return names
}

// hcaIDs returns the devices of ibv_devinfo's report, in order.
func hcaIDs(out string) []string {
	var names []string
	for _, l := range strings.Split(out, "\n") {
		if id, ok := strings.CutPrefix(l, "hca_id:"); ok {
			names = append(names, strings.TrimSpace(id))
		}
	}
	return names
}

// TestVMListOrder adds rxe2 after the VM's rxe0 and rxelo, so that creation
// order (rxe0, rxelo, rxe2: libibverbs' order, the RDMA netlink dump's) and
// name order (rxe0, rxe2, rxelo) differ, and checks that devinfo -l and
// devinfo without -d list the devices as ibv_devinfo does.
func TestVMListOrder(t *testing.T) {
	testkit.RequireVM(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const extra = "rxe2"
	testkit.AddRxeDevice(t, extra)

	want, got := runBoth(ctx, t, "-l")
	wl := listed(want)
	if !slices.Contains(wl, extra) || !slices.Contains(wl, testkit.RxeDev) || !slices.Contains(wl, testkit.LoopDev) {
		t.Fatalf("ibv_devinfo -l lists %q, want %s, %s and %s", wl, testkit.RxeDev, testkit.LoopDev, extra)
	}
	if slices.IsSorted(wl) {
		t.Fatalf("ibv_devinfo -l lists %q in name order: the test proves nothing", wl)
	}
	if want != got {
		t.Errorf("devinfo -l differs from ibv_devinfo -l:\nibv_devinfo:\n%s\ndevinfo:\n%s", want, got)
	}

	want, got = runBoth(ctx, t)
	if w, g := hcaIDs(want), hcaIDs(got); !slices.Equal(w, g) || !slices.Equal(w, wl) {
		t.Errorf("devices of the full report: ibv_devinfo %q, devinfo %q; ibv_devinfo -l %q", w, g, wl)
	}
	compareFields(t, parseDevinfo(t, want), parseDevinfo(t, got))
	if want != got && !t.Failed() {
		t.Errorf("same fields but different text:\nibv_devinfo:\n%s\ndevinfo:\n%s", want, got)
	}
}

// TestVMSameAsC: bad and odd command lines end as in ibv_devinfo: the
// same lines (the library's detail lines, "  (...)", aside) and the same
// exit status, from the option loop (getopt's complaints, the port check,
// -l as it is met, operands ignored, the port as a uint8_t) to the
// devices (an unknown one, a port a device lacks, on one device and on
// all).
func TestVMSameAsC(t *testing.T) {
	testkit.RequireVM(t)
	pptest.CompareWithC(t, "devinfo", "ibv_devinfo", func() []string { return nil }, [][]string{
		{"-d", "nosuchdev"}, {"-d", ""},
		{"-d", testkit.RxeDev, "-i", "2"}, {"-i", "2"}, {"-i", "0"}, {"-i", "x"},
		{"-i", "256", "-d", testkit.RxeDev}, {"-i", "257", "-d", testkit.LoopDev},
		{"-x"}, {"-h"}, {"-i"},
		{"-i", "0", "-x"}, {"-x", "-i", "0"}, {"-l", "-x"},
		{"-ib-dev=" + testkit.RxeDev}, {"--ib=" + testkit.RxeDev}, {"--nosuch=1"}, {"--list=1"},
		{"--ib-p", "1", "--ib-d", testkit.LoopDev},
	}, nil)
}

// TestParseDevinfo checks the parser on real ibv_devinfo -v output (host).
func TestParseDevinfo(t *testing.T) {
	want, err := os.ReadFile("testdata/rxelo-v.txt")
	if err != nil {
		t.Fatal(err)
	}
	f := parseDevinfo(t, string(want))
	for k, v := range map[string]string{
		"rxelo/transport":                            "InfiniBand (0)",
		"rxelo/device_cap_flags":                     "0x01223c76 +BAD_PKEY_CNTR +BAD_QKEY_CNTR +AUTO_PATH_MIG +CHANGE_PHY_PORT +UD_AV_PORT_ENFORCE +PORT_ACTIVE_EVENT +SYS_IMAGE_GUID +RC_RNR_NAK_GEN +SRQ_RESIZE +MEM_WINDOW +MEM_MGT_EXTENSIONS +MEM_WINDOW_TYPE_2B",
		"rxelo/general_odp_caps":                     "",
		"rxelo/rc_odp_caps":                          " +NO SUPPORT",
		"rxelo/tso_caps/max_tso":                     "0",
		"rxelo/rss_caps/rx_hash_function":            "0x0",
		"rxelo/packet_pacing_caps/qp_rate_limit_max": "0kbps",
		"rxelo/tag matching not supported":           "",
		"rxelo/num_comp_vectors":                     "2",
		"rxelo/port1/state":                          "PORT_ACTIVE (4)",
		"rxelo/port1/GID[2]":                         "::1, RoCE v2",
	} {
		if got, ok := f[k]; !ok || got != v {
			t.Errorf("%s = %q (present %v), want %q", k, got, ok, v)
		}
	}
	// The parse of our own output of the same device must be equal.
	var b bytes.Buffer
	writeDevice(&b, rxelo(t), true)
	compareFields(t, f, parseDevinfo(t, b.String()))
}
