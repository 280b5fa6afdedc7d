package bw

import (
	"fmt"
	"os"
	"strings"
)

// defJSONFile is where --out_json writes without --out_json_file
// (perftest's DEFAULT_JSON_FILE_NAME, in the working directory).
const defJSONFile = "perftest_out.json"

// writeJSON is what perftest does with --out_json each time it prints a
// result line: it rewrites the file with the test's description and
// that line's figures (so the file holds the last line printed). The
// "JSON" is perftest's own: unquoted keys, a comma after every value.
// A file that cannot be opened is reported and the run goes on, as in
// perftest.
func (t *test) writeJSON(results string) {
	if !t.o.OutJSON {
		return
	}
	name := t.o.OutJSONFile
	f, err := os.OpenFile(name, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o600)
	if err != nil {
		fmt.Fprintf(t.stderr, "failed to open %s\n", name)
		return
	}
	defer f.Close()
	var b strings.Builder
	b.WriteString("{\n")
	t.jsonInfo(&b)
	b.WriteString("results: {\n")
	b.WriteString(results)
	b.WriteString("},\n}\n")
	if _, err := f.WriteString(b.String()); err != nil {
		fmt.Fprintf(t.stderr, "failed to write %s: %v\n", name, err)
	}
}

// jsonInfo is write_test_info_to_file: the test description of
// printTestInfo, in the file's form.
func (t *test) jsonInfo(b *strings.Builder) {
	o := &t.o
	b.WriteString("test_info: {\n")
	fmt.Fprintf(b, "test: %s_", t.v)
	if t.v == Atomic {
		fmt.Fprintf(b, "%s_", t.o.AtomicOp)
	}
	if o.Tst == BW {
		if o.Duplex {
			b.WriteString("Bidirectional_")
		}
		if o.PostList > 1 {
			b.WriteString("Post_List_")
		}
		b.WriteString("BW_")
	} else {
		b.WriteString("Latency_")
	}
	b.WriteString("Test,\n")
	if o.Events {
		fmt.Fprintf(b, "Test with events: Using_%s_comp%d,\n", o.Dev, o.Vector)
	}
	fmt.Fprintf(b, "Dual_port: OFF,\nDevice: %q,\n", o.Dev)
	fmt.Fprintf(b, "Number_of_qps: %d,\nTransport_type: IB,\n", o.QPs)
	fmt.Fprintf(b, "Connection_type: %s,\nUsing_SRQ: %s,\n", o.Conn, onOff(o.SRQ))
	fmt.Fprintf(b, "PCIe_relax_order: %s,\n", onOff(!o.NoRelaxed))
	if !o.NoRelaxed && !roCompliant(pciDevices) {
		b.WriteString("WARNING1: \"CPU is not PCIe relaxed ordering compliant\",\n")
		b.WriteString("WARNING2: \"You should disable PCIe RO with --disable_pcie_relaxed for both server and client\",\n")
	}
	b.WriteString("ibv_wr_API: OFF,\n")
	for _, f := range t.infoFields() {
		fmt.Fprintf(b, f.json+",\n", f.val)
	}
	fmt.Fprintf(b, "rdma_cm_QPs: %s,\nData_ex_method: %s,\n", onOff(o.rdmaCM), exchangeMethod(o.commCM))
	if o.rdmaCM && o.tos != defTOS {
		fmt.Fprintf(b, "TOS: %d,\n", o.tos)
	}
	b.WriteString("},\n")
}

func onOff(b bool) string {
	if b {
		return "ON"
	}
	return "OFF"
}

// jsonCPU is REPORT_EXT_CPU_UTIL_JSON with --cpu_util in effect, else
// nothing.
func (t *test) jsonCPU() string {
	if c := t.cpuSample(); c != nil {
		return fmt.Sprintf("CPU_util: %.2f,\n", c.util())
	}
	return ""
}

// jsonBW is write_bw_report_to_file's figures for a bandwidth line.
func (t *test) jsonBW(r Report) string {
	var s string
	switch t.o.Output {
	case OutputBW:
		s = fmt.Sprintf("bw_avg: %f,\n", r.Avg)
	case OutputMsgRate:
		s = fmt.Sprintf("msgRate_avg: %f,\n", r.MsgRate)
	default:
		f := "%.2f"
		if t.o.Gbits && r.Avg < 0.1 {
			f = "%.6f" // REPORT_FMT_EXT_JSON
		}
		s = fmt.Sprintf("MsgSize: %d,\nn_iterations: %d,\nBW_peak: "+f+",\nBW_average: "+f+",\nMsgRate: %.6f,\n",
			r.Size, r.Iters, r.Peak, r.Avg, r.MsgRate)
	}
	return s + t.jsonCPU()
}

// jsonLat is write_report_lat_to_file's figures for a latency line.
func (t *test) jsonLat(r LatReport) string {
	if t.o.Output == OutputLatency {
		return fmt.Sprintf("avg_lat: %f,\n", r.Avg)
	}
	c := func(f float64) string { return strings.TrimSpace(cFloat(f)) }
	return fmt.Sprintf("MsgSize: %d,\nn_iterations: %d,\nt_min: %s,\nt_max: %s,\nt_typical: %s,\nt_avg: %s,\nt_stdev: %s,\npercentile_99: %s,\npercentile_99.9: %s,\n",
		r.Size, r.Iters, c(r.Min), c(r.Max), c(r.Typical), c(r.Avg), c(r.Stdev), c(r.P99), c(r.P99_9)) + t.jsonCPU()
}

// jsonLatDur is write_report_lat_duration_to_file's figures for a line
// of a latency run of fixed duration.
func (t *test) jsonLatDur(r LatDurReport) string {
	if t.o.Output == OutputLatency {
		return fmt.Sprintf("t_avg: %f\n", r.Avg) // (perftest's, without the comma)
	}
	c := func(f float64) string { return strings.TrimSpace(cFloat(f)) }
	return fmt.Sprintf("MsgSize: %d,\nn_iterations: %d,\nt_avg: %s,\ntps_average: %s,\n", r.Size, r.Iters, c(r.Avg), c(r.TPS)) + t.jsonCPU()
}
