package devx

import (
	"testing"

	"github.com/pureverbs/pureverbs/internal/sys"
	m "github.com/pureverbs/pureverbs/internal/testkit/ioctlmodel"
)

// TestBrokenCommandsFailModel breaks every golden DEVX command in every
// way the kernel's validation knows, one defect at a time, and checks the
// model rejects each with the kernel's errno. (The model itself is proved
// against real kernels in internal/testkit/ioctlmodel's VM test.)
func TestBrokenCommandsFailModel(t *testing.T) {
	api := m.Mlx5()
	n := 0
	for _, g := range goldens() {
		cmd := sys.NewIoctl()
		g.build(cmd)
		good := m.FromIoctl(cmd)
		meth := api.Method(good.Object, good.Method)
		try := func(what string, want sys.Errno, c m.Cmd) {
			t.Helper()
			n++
			if v := api.Check(g.env(), &c); v.Errno != want {
				t.Errorf("%s, %s: model says %v, want %v\n\t%s", g.name, what, v, want, c.Describe(api))
			}
		}
		edit := func(i int, f func(*m.Attr)) m.Cmd {
			c := good
			c.Attrs = append([]m.Attr(nil), good.Attrs...)
			f(&c.Attrs[i])
			return c
		}
		{
			c := good
			c.DriverID = 14
			try("rxe driver id", sys.EINVAL, c)
			c = good
			c.Reserved1 = 1
			try("reserved header field", sys.EPROTONOSUPPORT, c)
			c = good
			c.Attrs = append(append([]m.Attr(nil), good.Attrs...), m.Attr{ID: 0x101e, Len: 8, Flags: m.FlagMandatory})
			try("unknown mandatory attribute", sys.EPROTONOSUPPORT, c)
		}
		for i, a := range good.Attrs {
			s := meth.Attr(a.ID)
			if s.Mandatory {
				c := good
				c.Attrs = append(append([]m.Attr(nil), good.Attrs[:i]...), good.Attrs[i+1:]...)
				try(s.Name+" missing", sys.EINVAL, c)
			}
			c := good
			c.Attrs = append(append([]m.Attr(nil), good.Attrs...), a)
			try(s.Name+" twice", sys.EINVAL, c)
			try(s.Name+" attr_data set", sys.EINVAL, edit(i, func(a *m.Attr) { a.AttrData = 1 }))
			switch s.Kind {
			case m.IDR, m.FD:
				try(s.Name+" with a length", sys.EINVAL, edit(i, func(a *m.Attr) { a.Len = 4 }))
				if s.Access == m.New {
					break
				}
				if s.Kind == m.IDR {
					try(s.Name+" names no object", sys.ENOENT, edit(i, func(a *m.Attr) { a.Data = 1234 }))
					if s.ObjType != m.AnyObject {
						other := uint64(gUmem)
						if s.ObjType == objUmem {
							other = gObj
						}
						try(s.Name+" names an object of another type", sys.EINVAL, edit(i, func(a *m.Attr) { a.Data = other }))
					}
				} else {
					try(s.Name+" is not open", sys.EBADF, edit(i, func(a *m.Attr) { a.Data = 999 }))
					try(s.Name+" is an eventfd", sys.EBADF, edit(i, func(a *m.Attr) { a.Data = gEventFD }))
				}
			case m.PtrIn, m.PtrOut:
				if s.MinLen > 0 {
					try(s.Name+" below its minimum", sys.EINVAL, edit(i, func(a *m.Attr) {
						a.Len = s.MinLen - 1
						if a.Buf != nil {
							a.Buf = a.Buf[:a.Len]
						}
					}))
				}
				if s.Len == s.MinLen && s.Len < 0xFFFF && !s.ZeroTrailing {
					try(s.Name+" longer than its type", sys.EINVAL, edit(i, func(a *m.Attr) { a.Len = s.Len + 1; a.Buf = make([]byte, a.Len) }))
				}
				if s.Kind == m.PtrIn && a.Len > 8 {
					try(s.Name+" pointer unreadable", sys.EFAULT, edit(i, func(a *m.Attr) { a.Buf, a.Data = nil, 0x10 }))
				}
				if s.Kind == m.PtrOut && a.Len > 0 {
					try(s.Name+" pointer unwritable", sys.EFAULT, edit(i, func(a *m.Attr) { a.Buf, a.Data = nil, 0 }))
				}
			}
		}
	}
	t.Logf("%d broken variants of %d DEVX commands rejected by the model", n, len(goldens()))
}

// TestDevxHandlerRulesInModel: DEVX-specific rules of devx.c the model
// carries, which Subscribe, NewEventChannel, RegUmem and QueryAsync check
// before sending (so the kernel never sees these commands).
func TestDevxHandlerRulesInModel(t *testing.T) {
	api := m.Mlx5()
	env := goldenEnv()
	build := func(f func(c *sys.Ioctl)) m.Cmd {
		c := sys.NewIoctl()
		f(c)
		return m.FromIoctl(c)
	}
	for _, tc := range []struct {
		name string
		cmd  m.Cmd
		want sys.Errno
	}{
		{"cookie and eventfd together", func() m.Cmd {
			c := build(func(c *sys.Ioctl) { buildSubscribeFd(c, drvMlx5, gEventCh, 0, false, 1, gEventFD) })
			c.Attrs = append(c.Attrs, m.Attr{ID: 0x1004, Len: 8, Flags: 1})
			return c
		}(), sys.EINVAL},
		{"17 events", build(func(c *sys.Ioctl) {
			buildSubscribe(c, drvMlx5, gEventCh, 0, false, eventList(make([]uint16, 17)), 0)
		}), sys.EINVAL},
		{"16 events", build(func(c *sys.Ioctl) {
			buildSubscribe(c, drvMlx5, gEventCh, 0, false, eventList(make([]uint16, 16)), 0)
		}), 0},
		{"odd event list", build(func(c *sys.Ioctl) {
			buildSubscribe(c, drvMlx5, gEventCh, 0, false, []byte{1, 0, 2}, 0)
		}), sys.EINVAL},
		{"unknown channel flag", build(func(c *sys.Ioctl) { buildEventChannelAlloc(c, drvMlx5, 2) }), sys.EINVAL},
		{"umem remote atomic", build(func(c *sys.Ioctl) {
			var id uint32
			buildUmemReg(c, drvMlx5, gAddr, 4096, 8, DefaultPageSizes, true, &id)
		}), sys.EINVAL},
		{"async query out_len beyond u16", func() m.Cmd {
			c := build(func(c *sys.Ioctl) { buildObjQueryAsync(c, drvMlx5, gObj, make([]byte, 16), 16, 1, gCmdComp) })
			c.Attrs[2].Data = 1 << 16
			return c
		}(), sys.EINVAL},
		{"async query on an event channel fd", build(func(c *sys.Ioctl) {
			buildObjQueryAsync(c, drvMlx5, gObj, make([]byte, 16), 16, 1, gEventCh)
		}), sys.EBADF},
		{"query of a umem handle (any object)", build(func(c *sys.Ioctl) {
			buildObjQuery(c, drvMlx5, gUmem, make([]byte, 16), make([]byte, 16))
		}), 0},
		{"DEVX on the rxe API", func() m.Cmd {
			return build(func(c *sys.Ioctl) { buildGeneral(c, drvMlx5, make([]byte, 16), make([]byte, 16)) })
		}(), sys.EINVAL}, // rxe's driver id is checked first
	} {
		target := api
		if tc.name == "DEVX on the rxe API" {
			target = m.Rxe()
		}
		if v := target.Check(env, &tc.cmd); v.Errno != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, v, tc.want)
		}
	}
}
