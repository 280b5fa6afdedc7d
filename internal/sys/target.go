//go:build !(amd64 || arm64 || ppc64le || riscv64 || loong64 || mips64le)

package sys

// The library lays out the kernel's structures and attribute values as a
// 64-bit little-endian host does (abi's generated types, the ioctl's
// inline values): on any other target it would send wrong commands, so it
// does not build there.
var _ = pureverbs_supports_only_64_bit_little_endian_targets
