package uverbs

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// nilRecvTypes are the package's object types, with methods on a pointer
// receiver: each method must work on a nil and on a zero-value receiver.
var nilRecvTypes = []any{
	(*AH)(nil), (*Buffer)(nil), (*CompChannel)(nil), (*Context)(nil), (*CQ)(nil),
	(*MR)(nil), (*MW)(nil), (*PD)(nil), (*QP)(nil), (*SRQ)(nil),
}

// zeroRecvTypes are the other exported types with methods: error types
// (a nil *OpError panics in Error as a nil *os.PathError does) and value
// types, listed as pointers for their whole method sets. Each method must
// work on a zero value.
var zeroRecvTypes = []any{
	(*OpError)(nil), (*UnackedError)(nil), (*PostError)(nil),
	(*Device)(nil), (*GID)(nil), (*MTU)(nil), (*Rate)(nil), (*Access)(nil),
	(*EventType)(nil), (*ElementKind)(nil), (*NodeType)(nil), (*MWType)(nil),
	(*QPType)(nil), (*QPState)(nil), (*PortState)(nil), (*LinkLayer)(nil),
	(*GIDType)(nil), (*WROpcode)(nil), (*WCStatus)(nil), (*WCOpcode)(nil),
	(*WaitMode)(nil), (*SGE)(nil), (*SendWR)(nil), (*RecvWR)(nil), (*WC)(nil),
	(*AHAttr)(nil), (*QPAttr)(nil), (*QPCap)(nil), (*QPInitAttr)(nil),
	(*SRQAttr)(nil), (*MWBindInfo)(nil), (*DeviceAttr)(nil), (*PortAttr)(nil),
	(*GIDEntry)(nil), (*CQOptions)(nil),
}

// callNoPanic calls m on recv with zero arguments (an already cancelled
// context for a context.Context) and reports a panic or a call that does
// not return. ok is false when m takes arguments it cannot make up.
func callNoPanic(recv reflect.Value, m reflect.Method) (ok bool, err error) {
	ft := m.Type // receiver first
	args := []reflect.Value{recv}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ctxType := reflect.TypeOf((*context.Context)(nil)).Elem()
	for i := 1; i < ft.NumIn(); i++ {
		in := ft.In(i)
		switch {
		case in == ctxType:
			args = append(args, reflect.ValueOf(ctx))
		case in.Kind() == reflect.Func, in.Kind() == reflect.Chan:
			return false, nil
		default:
			args = append(args, reflect.Zero(in))
		}
	}
	done := make(chan error, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- fmt.Errorf("panic: %v", r)
			}
		}()
		m.Func.Call(args)
		done <- nil
	}()
	select {
	case err := <-done:
		return true, err
	case <-time.After(5 * time.Second):
		return true, fmt.Errorf("did not return")
	}
}

// TestNilAndZeroReceivers calls every exported method of the exported
// types on a nil and on a zero-value receiver: none may panic (getters
// return zero values, operations typed errors).
func TestNilAndZeroReceivers(t *testing.T) {
	check := func(p any, withNil bool) {
		pt := reflect.TypeOf(p)
		name := pt.Elem().Name()
		for i := 0; i < pt.NumMethod(); i++ {
			m := pt.Method(i)
			if strings.HasSuffix(m.Name, "ForTest") {
				continue
			}
			recvs := map[string]reflect.Value{"zero": reflect.New(pt.Elem())}
			if withNil {
				recvs["nil"] = reflect.Zero(pt)
			}
			for what, r := range recvs {
				if ok, err := callNoPanic(r, m); ok && err != nil {
					t.Errorf("(%s *%s).%s: %v", what, name, m.Name, err)
				}
			}
		}
	}
	for _, p := range nilRecvTypes {
		check(p, true)
	}
	for _, p := range zeroRecvTypes {
		check(p, false)
	}
}

// TestNilGetters pins the values the getters return on nil receivers.
func TestNilGetters(t *testing.T) {
	var (
		c  *Context
		mr *MR
		ch *CompChannel
		mw *MW
	)
	if c.String() != "uverbs.Context(<nil>)" || c.Device().Name != "" || c.DriverID() != 0 || c.NumCompVectors() != 0 {
		t.Errorf("nil Context: %q %v %d %d", c.String(), c.Device(), c.DriverID(), c.NumCompVectors())
	}
	if mr.LKey() != 0 || mr.RKey() != 0 || mr.Addr() != 0 || mr.IOVA() != 0 || mr.Len() != 0 ||
		mr.Bytes() != nil || mr.PD() != nil || mr.Context() != nil || mr.Handle() != 0 || mr.Access() != 0 {
		t.Error("nil MR: a getter returned a non-zero value")
	}
	if ch.Fd() != -1 || new(CompChannel).Fd() != -1 || ch.Context() != nil {
		t.Errorf("nil/zero CompChannel: Fd %d, %d", ch.Fd(), new(CompChannel).Fd())
	}
	mw.SetRKey(7)
	if mw.RKey() != 0 || mw.Type() != 0 || mw.PD() != nil {
		t.Error("nil MW: a getter returned a non-zero value")
	}
	var qp *QP
	var cq *CQ
	var srq *SRQ
	if qp.QPN() != 0 || qp.Cap() != (QPCap{}) || qp.SendCQ() != nil || qp.SRQ() != nil ||
		cq.CQE() != 0 || cq.Channel() != nil || cq.UserHandle() != 0 ||
		srq.SRQN() != 0 || srq.Attr() != (SRQAttr{}) || srq.Context() != nil {
		t.Error("nil QP/CQ/SRQ: a getter returned a non-zero value")
	}
}
