package uverbs

// Rate is an InfiniBand static rate (enum ibv_rate), the pace an address
// vector limits injection to (AHAttr.StaticRate). RateMax (0) sets no
// limit: the port's rate applies. The numbering is the enum's, not in
// order of speed; Mult and Mbps convert.
type Rate uint8

// The rates of enum ibv_rate (rdma-core v44).
const (
	RateMax      Rate = 0
	Rate2_5Gbps  Rate = 2
	Rate5Gbps    Rate = 5
	Rate10Gbps   Rate = 3
	Rate20Gbps   Rate = 6
	Rate30Gbps   Rate = 4
	Rate40Gbps   Rate = 7
	Rate60Gbps   Rate = 8
	Rate80Gbps   Rate = 9
	Rate120Gbps  Rate = 10
	Rate14Gbps   Rate = 11
	Rate56Gbps   Rate = 12
	Rate112Gbps  Rate = 13
	Rate168Gbps  Rate = 14
	Rate25Gbps   Rate = 15
	Rate100Gbps  Rate = 16
	Rate200Gbps  Rate = 17
	Rate300Gbps  Rate = 18
	Rate28Gbps   Rate = 19
	Rate50Gbps   Rate = 20
	Rate400Gbps  Rate = 21
	Rate600Gbps  Rate = 22
	Rate800Gbps  Rate = 23
	Rate1200Gbps Rate = 24
)

// rateTable is each rate's multiple of 2.5 Gbit/s (-1 where libibverbs
// gives none: the rates of 64b/66b links that are not a whole multiple)
// and its Mbit/s as libibverbs computes them.
var rateTable = [...]struct {
	mult, mbps int
}{
	Rate2_5Gbps:  {1, 2500},
	Rate5Gbps:    {2, 5000},
	Rate10Gbps:   {4, 10000},
	Rate20Gbps:   {8, 20000},
	Rate30Gbps:   {12, 30000},
	Rate40Gbps:   {16, 40000},
	Rate60Gbps:   {24, 60000},
	Rate80Gbps:   {32, 80000},
	Rate120Gbps:  {48, 120000},
	Rate14Gbps:   {-1, 14062},
	Rate56Gbps:   {-1, 56250},
	Rate112Gbps:  {-1, 112500},
	Rate168Gbps:  {-1, 168750},
	Rate25Gbps:   {-1, 25781},
	Rate100Gbps:  {-1, 103125},
	Rate200Gbps:  {-1, 206250},
	Rate300Gbps:  {-1, 309375},
	Rate28Gbps:   {11, 28125},
	Rate50Gbps:   {20, 53125},
	Rate400Gbps:  {160, 425000},
	Rate600Gbps:  {240, 637500},
	Rate800Gbps:  {320, 850000},
	Rate1200Gbps: {480, 1275000},
}

func (r Rate) entry() (mult, mbps int) {
	if r == RateMax || int(r) >= len(rateTable) {
		return -1, -1
	}
	e := rateTable[r]
	if e.mbps == 0 { // a hole in the enum (1)
		return -1, -1
	}
	return e.mult, e.mbps
}

// Mult returns the rate as a multiple of 2.5 Gbit/s (ibv_rate_to_mult(3)),
// -1 for RateMax, an unknown rate, and the rates that are not a whole
// multiple.
func (r Rate) Mult() int {
	m, _ := r.entry()
	return m
}

// Mbps returns the rate in Mbit/s (ibv_rate_to_mbps(3)), -1 for RateMax
// and an unknown rate.
func (r Rate) Mbps() int {
	_, b := r.entry()
	return b
}

// MultToRate returns the rate that is mult times 2.5 Gbit/s
// (mult_to_ibv_rate(3)), RateMax when no rate is.
func MultToRate(mult int) Rate {
	for r := range rateTable {
		if e := rateTable[r]; e.mbps != 0 && e.mult == mult && mult > 0 {
			return Rate(r)
		}
	}
	return RateMax
}

// MbpsToRate returns the rate of exactly mbps Mbit/s (mbps_to_ibv_rate(3)),
// RateMax when no rate is.
func MbpsToRate(mbps int) Rate {
	for r := range rateTable {
		if e := rateTable[r]; e.mbps != 0 && e.mbps == mbps {
			return Rate(r)
		}
	}
	return RateMax
}
