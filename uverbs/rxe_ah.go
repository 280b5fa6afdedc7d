package uverbs

import (
	"fmt"

	"github.com/pureverbs/pureverbs/abi"
	"github.com/pureverbs/pureverbs/internal/sys"
)

// The rxe half of an AH (rdma_user_rxe.h): CREATE_AH takes no driver
// input; a kernel that knows user AHs by number (all that this library
// supports, 6.1 and 6.12 among them) returns struct rxe_create_ah_resp
// (8 bytes) with ah_num, which UD send WQEs then carry instead of a full
// address vector. A kernel that leaves ah_num 0 expects the legacy AV that
// rdma-core builds in user space (resolving the MAC itself); that path is
// not implemented.

func (rxeProvider) newAH() ahDriver { return new(rxeAH) }

type rxeAH struct{ resp abi.RxeCreateAhResp }

func (d *rxeAH) udataOut() []byte { return sys.AsBytes(&d.resp) }

func (d *rxeAH) created() (uint32, error) {
	if d.resp.AhNum == 0 {
		return 0, fmt.Errorf("%w: the kernel returned no rxe ah_num (legacy user-space address vectors are not implemented)", ErrNotSupported)
	}
	return d.resp.AhNum, nil
}
