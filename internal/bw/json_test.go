package bw

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pureverbs/pureverbs/uverbs"
)

// TestOutJSON: --out_json rewrites the file at each result line with
// perftest's description and the line's figures, in perftest's format
// (write_test_info_to_file and the report writers of
// perftest_parameters.c); a file that cannot be opened is reported on
// stderr and the run goes on.
func TestOutJSON(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "out.json")
	var out, errb bytes.Buffer
	tt := &test{v: Send, client: false, stdout: &out, stderr: &errb, mtu: uverbs.MTU(3), linkEth: true, gidIndex: 1,
		o: Options{Tst: BW, Dev: "rxe0", QPs: 2, Conn: RC, NoRelaxed: true, RxDepth: 512, TxDepth: 128, CQMod: 100,
			RecvPostList: 4, PostList: 1, OutJSON: true, OutJSONFile: file}}
	read := func() string {
		t.Helper()
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	info := "{\ntest_info: {\ntest: Send_BW_Test,\nDual_port: OFF,\nDevice: \"rxe0\",\nNumber_of_qps: 2,\nTransport_type: IB,\n" +
		"Connection_type: RC,\nUsing_SRQ: OFF,\nPCIe_relax_order: OFF,\nibv_wr_API: OFF,\nRecv_Post_List: 4,\nRX_depth: 512,\n" +
		"CQ_Moderation: 100,\nMtu: 1024,\nLink_type: Ethernet,\nGID_index: 1,\nMax_inline_data: 0,\nrdma_cm_QPs: OFF,\n" +
		"Data_ex_method: Ethernet,\n},\n"
	tt.writeLine(Report{Size: 4096, Iters: 1000, Peak: 0, Avg: 1234.5678, MsgRate: 0.316049})
	want := info + "results: {\nMsgSize: 4096,\nn_iterations: 1000,\nBW_peak: 0.00,\nBW_average: 1234.57,\nMsgRate: 0.316049,\n},\n}\n"
	if got := read(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("file mode %v, %v", fi.Mode(), err)
	}
	// The next line replaces the file; --cpu_util adds its figure.
	tt.o.cpuUtil, tt.cpu = true, cpuSample{user: [2]uint64{0, 10}, idle: [2]uint64{0, 30}}
	tt.writeLine(Report{Size: 8192, Iters: 10, Avg: 2})
	if got := read(); !strings.HasSuffix(got, "MsgSize: 8192,\nn_iterations: 10,\nBW_peak: 0.00,\nBW_average: 2.00,\nMsgRate: 0.000000,\nCPU_util: 25.00,\n},\n}\n") ||
		strings.Contains(got, "4096") {
		t.Errorf("second line: %s", got)
	}
	// --output: the one figure; Gb/s below 0.1: six digits.
	tt.o.cpuUtil = false
	tt.o.Output = OutputMsgRate
	tt.writeLine(Report{Size: 64, MsgRate: 1.5})
	if got := read(); !strings.HasSuffix(got, "results: {\nmsgRate_avg: 1.500000,\n},\n}\n") {
		t.Errorf("--output=message_rate: %s", got)
	}
	tt.o.Output, tt.o.Gbits = OutputFull, true
	tt.writeLine(Report{Size: 2, Iters: 5, Peak: 0.01, Avg: 0.002, MsgRate: 0.125})
	if got := read(); !strings.Contains(got, "BW_peak: 0.010000,\nBW_average: 0.002000,\nMsgRate: 0.125000,\n") {
		t.Errorf("Gb/s: %s", got)
	}
	// Latency lines.
	lt := &test{v: Read, client: true, stdout: &out, stderr: &errb, mtu: uverbs.MTU(5), gidIndex: -1, outReads: 16,
		o: Options{Tst: LAT, Dev: "rxelo", QPs: 1, Conn: RC, NoRelaxed: true, TxDepth: 1, PostList: 1, RecvPostList: 1,
			OutJSON: true, OutJSONFile: file, Events: true, Vector: 0}}
	lt.writeJSON(lt.jsonLat(LatReport{Size: 2, Iters: 1000, Min: 1, Max: 9.5, Typical: 2, Avg: 2.25, Stdev: 0.5, P99: 8, P99_9: 9}))
	want = "{\ntest_info: {\ntest: RDMA_Read_Latency_Test,\nTest with events: Using_rxelo_comp0,\nDual_port: OFF,\nDevice: \"rxelo\",\n" +
		"Number_of_qps: 1,\nTransport_type: IB,\nConnection_type: RC,\nUsing_SRQ: OFF,\nPCIe_relax_order: OFF,\nibv_wr_API: OFF,\n" +
		"TX_depth : 1,\nMtu: 4096,\nLink_type: IB,\nOutstand_reads: 16,\nrdma_cm_QPs: OFF,\nData_ex_method: Ethernet,\n},\n" +
		"results: {\nMsgSize: 2,\nn_iterations: 1000,\nt_min: 1.00,\nt_max: 9.50,\nt_typical: 2.00,\nt_avg: 2.25,\nt_stdev: 0.50,\n" +
		"percentile_99: 8.00,\npercentile_99.9: 9.00,\n},\n}\n"
	if got := read(); got != want {
		t.Errorf("latency: got\n%s\nwant\n%s", got, want)
	}
	lt.o.Output = OutputLatency
	lt.writeJSON(lt.jsonLatDur(LatDurReport{Size: 2, Iters: 100, Avg: 3.5, TPS: 1000}))
	if got := read(); !strings.HasSuffix(got, "results: {\nt_avg: 3.500000\n},\n}\n") {
		t.Errorf("latency, -D, --output=latency: %s", got)
	}
	if errb.Len() != 0 {
		t.Errorf("stderr %q", errb.String())
	}
	// A file that cannot be opened: perftest's complaint, and no failure.
	tt.o.OutJSONFile = filepath.Join(dir, "no", "such", "dir.json")
	tt.writeLine(Report{Size: 2})
	if got := errb.String(); got != "failed to open "+tt.o.OutJSONFile+"\n" {
		t.Errorf("stderr %q", got)
	}
}
