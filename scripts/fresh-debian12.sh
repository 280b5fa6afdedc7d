#!/usr/bin/env bash
# fresh-debian12.sh: prove the README's promise that `make demo` and
# `make test` do all the set-up on a fresh Debian 12 machine.
#
# It builds a minimal Debian 12 root (debootstrap --variant=minbase bookworm,
# plus git, make and ca-certificates and nothing else; the apt sources of a
# standard install: bookworm, bookworm-updates, bookworm-security), clones
# this repository into it, and runs each make target there as root through
# chroot, with a clean environment (no Go, no cache, no host PATH), logging
# each target's output and duration. /proc, /sys and /dev are bind-mounted
# (QEMU runs in TCG mode; /dev/kvm is not used).
#
# Not part of `make test`: it downloads Go, the kernel and rdma-core
# packages and runs the whole VM suite in TCG. On a 2-core host it took
# 51 minutes (2026-12-06, d3a75ae: root 36 s, make demo 2m58s, make test 47m21s;
# README.md, "Two commands"). With -s trixie (2026-12-07, 0c05fc0 on a0ae128): root 39 s,
# make demo 2m46s, make test about 47 min (docs/testing.md, "Debian 13 hosts").
#
# Usage (as root, on a Debian or Ubuntu host with network access to the
# Debian mirror and the Go module proxy):
#
#   scripts/fresh-debian12.sh [-d DIR] [-r REV] [-k] [-C] [-m MIRROR] [-s SUITE] [TARGET...]
#
#   -d DIR     where to build the root (default: a new /var/tmp/pureverbs-fresh.XXXX)
#   -r REV     the commit to clone (default: HEAD of this repository);
#              "worktree" also copies uncommitted changes of tracked files
#   -k         keep the root afterwards (default: delete it on success)
#   -C         also trust the CA certificates the host trusts beyond Debian's
#              (for a network whose HTTPS goes through an intercepting proxy:
#              the Go module proxy is reached over HTTPS); they go to
#              /usr/local/share/ca-certificates in the root, as an admin
#              would add them on such a network
#   -m MIRROR  Debian mirror (default http://deb.debian.org/debian)
#   -s SUITE   the Debian suite of the root (default bookworm; trixie
#              proves the same on a fresh Debian 13 machine, whose guests
#              are still Debian 12's: rxevm downloads them itself)
#   TARGET     make targets, run in order (default: demo test)
#
# Exit status: 0 if every target passed, 1 if one failed (the others still
# run), 2 if the root could not be built.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
dir=
rev=HEAD
keep=0
hostca=0
mirror=http://deb.debian.org/debian
suite=bookworm
while getopts "d:r:kCm:s:h" opt; do
	case $opt in
	d) dir=$OPTARG ;;
	r) rev=$OPTARG ;;
	k) keep=1 ;;
	C) hostca=1 ;;
	m) mirror=$OPTARG ;;
	s) suite=$OPTARG ;;
	h) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(demo test)

log() { printf 'fresh-debian12: %s\n' "$*"; }
die() { log "$*" >&2; exit 2; }

[ "$(id -u)" = 0 ] || die "run as root (debootstrap, chroot and mounts need it)"
if [ -z "$dir" ]; then
	dir=$(mktemp -d /var/tmp/pureverbs-fresh.XXXXXX)
else
	[ ! -e "$dir" ] || [ -z "$(ls -A "$dir")" ] || die "$dir exists and is not empty"
	mkdir -p "$dir"
fi
dir=$(cd "$dir" && pwd)
logs=$dir.logs
mkdir -p "$logs"

mounted=()
cleanup() {
	local i
	for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
		umount -l "${mounted[i]}" 2>/dev/null || true
	done
}
trap cleanup EXIT

t_all=$(date +%s)
if ! command -v debootstrap >/dev/null; then
	log "installing debootstrap on the host"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap >/dev/null ||
		{ apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap >/dev/null; } ||
		die "cannot install debootstrap"
fi

t0=$(date +%s)
log "debootstrap --variant=minbase $suite $dir (log: $logs/debootstrap.log)"
debootstrap --variant=minbase --include=git,make,ca-certificates "$suite" "$dir" "$mirror" \
	>"$logs/debootstrap.log" 2>&1 || { tail -20 "$logs/debootstrap.log" >&2; die "debootstrap failed"; }
# The apt sources of a standard installation of the suite (Debian 13's
# keyring is the .pgp one; the .gpg may be gone from it).
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
[ -e "$dir$keyring" ] || keyring=/usr/share/keyrings/debian-archive-keyring.pgp
rm -f "$dir/etc/apt/sources.list"
cat >"$dir/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $mirror
Suites: $suite $suite-updates
Components: main
Signed-By: $keyring

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: $suite-security
Components: main
Signed-By: $keyring
EOF
cp /etc/resolv.conf "$dir/etc/resolv.conf" 2>/dev/null || true
echo fresh-debian12 >"$dir/etc/hostname"
if [ "$hostca" = 1 ]; then
	# Each certificate of the host's bundle that the root's bundle lacks.
	awk -v out="$dir/usr/local/share/ca-certificates/host-" -v have="$dir/etc/ssl/certs/ca-certificates.crt" '
		BEGIN { while ((getline l < have) > 0) { c = c l "\n"; if (l ~ /END CERT/) { known[c] = 1; c = "" } } }
		/BEGIN CERT/ { c = "" }
		{ c = c $0 "\n" }
		/END CERT/ { if (!(c in known)) { n++; printf "%s", c > (out n ".crt"); close(out n ".crt") } }
		END { print n + 0 }' /etc/ssl/certs/ca-certificates.crt >"$logs/host-ca.count"
	chroot "$dir" update-ca-certificates >/dev/null 2>&1 || die "update-ca-certificates failed in the root"
	log "added $(cat "$logs/host-ca.count") CA certificates the host trusts (-C)"
fi
log "root ($suite, $(cat "$dir/etc/debian_version")) built in $(($(date +%s) - t0)) s; packages: $(chroot "$dir" dpkg-query -W -f='.\n' | wc -l)"

# The clone, as a new user would make it (from this repository's commit).
commit=$(git -C "$repo" rev-parse --verify "${rev/#worktree/HEAD}^{commit}")
git clone -q --no-local --no-checkout "$repo" "$dir/root/pureverbs"
git -C "$dir/root/pureverbs" checkout -q -B fresh "$commit"
if [ "$rev" = worktree ]; then
	# Tracked files as they are in the work tree (uncommitted edits too).
	git -C "$repo" diff HEAD --binary | git -C "$dir/root/pureverbs" apply --allow-empty --binary
	log "cloned $commit plus the work tree's uncommitted changes"
else
	log "cloned $commit"
fi

for m in proc sys dev dev/pts; do
	mkdir -p "$dir/$m"
	mount --bind "/$m" "$dir/$m"
	mounted+=("$dir/$m")
done

# A login-like clean environment: nothing from the host's Go set-up.
run_in_root() {
	chroot "$dir" /usr/bin/env -i HOME=/root USER=root LOGNAME=root SHELL=/bin/bash \
		PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		LANG=C.UTF-8 TERM=dumb \
		bash -c 'cd /root/pureverbs && "$@"' bash "$@"
}

status=0
results=()
for t in "${targets[@]}"; do
	log "make $t (log: $logs/make-$t.log)"
	t0=$(date +%s)
	set +e
	run_in_root make "$t" 2>&1 | tee "$logs/make-$t.log" | sed -u 's/^/  | /'
	rc=${PIPESTATUS[0]}
	set -e
	d=$(($(date +%s) - t0))
	if [ "$rc" = 0 ]; then
		results+=("ok   make $t: $((d / 60))m$((d % 60))s")
	else
		results+=("FAIL make $t: exit $rc after $((d / 60))m$((d % 60))s")
		status=1
	fi
	log "${results[-1]}"
done

cleanup
mounted=()
log "---- summary (root $dir, logs $logs) ----"
for r in "${results[@]}"; do log "$r"; done
d=$(($(date +%s) - t_all))
log "total $((d / 60))m$((d % 60))s"
if [ "$status" = 0 ] && [ "$keep" = 0 ]; then
	rm -rf --one-file-system "$dir"
	log "removed $dir (logs kept)"
fi
exit $status
