package uverbs

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// QueryPKey returns entry index of port's P_Key table (ibv_query_pkey(3)),
// in host byte order (libibverbs stores it big-endian). As libibverbs
// does, it reads the kernel's sysfs table
// (/sys/class/infiniband/<dev>/ports/<port>/pkeys/<index>); rxe has one
// entry, 0xffff, the default full-membership P_Key. An index past the
// table or a port the device lacks is an error wrapping unix.ENOENT (and
// fs.ErrNotExist); a negative one, ErrInvalid.
func (c *Context) QueryPKey(port, index int) (uint16, error) {
	if c == nil {
		return 0, errNilContext
	}
	if port < 1 || index < 0 {
		return 0, invalidErr("device", "query_pkey", "port %d index %d", port, index)
	}
	if c.Closed() {
		return 0, closedErr("device", "query_pkey")
	}
	pkey, err := readPKey(filepath.Join("/sys/class/infiniband", c.dev.Name, "ports"), port, index)
	if err != nil {
		return 0, c.opErr("device", "query_pkey", err)
	}
	return pkey, nil
}

// PKeyIndex returns the index of pkey in port's P_Key table
// (ibv_get_pkey_index(3)): the first entry equal to it in all 16 bits, as
// libibverbs compares them (the membership bit counts). A P_Key the table
// does not hold is an error wrapping unix.ENOENT, as libibverbs fails it.
func (c *Context) PKeyIndex(port int, pkey uint16) (int, error) {
	for i := 0; ; i++ {
		p, err := c.QueryPKey(port, i)
		if err != nil {
			return -1, err
		}
		if p == pkey {
			return i, nil
		}
	}
}

// readPKey reads entry index of port's table under ports (a device's
// sysfs ports directory): a hexadecimal number, as the kernel prints it
// ("0xffff"), read as libibverbs' sscanf("%hx") reads it.
func readPKey(ports string, port, index int) (uint16, error) {
	path := filepath.Join(ports, strconv.Itoa(port), "pkeys", strconv.Itoa(index))
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(raw))
	v, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimPrefix(s, "0x"), "0X"), 16, 16)
	if err != nil {
		return 0, fmt.Errorf("%w: %s: %q", ErrSysfs, path, s)
	}
	return uint16(v), nil
}
