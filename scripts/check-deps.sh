#!/usr/bin/env bash
# check-deps.sh: scripts/deps.sh's Go install, with fake commands (no
# network, no apt-get, no root needed): when the toolchain module cannot
# be fetched, deps.sh says why (go mod download -json's Error field) and
# what to check, leaves the Go installed before as it was and removes its
# temporary directories; when it can, the new tree replaces the old one
# whole; an install interrupted between its renames is undone.
set -euo pipefail

cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
fail() { echo "check-deps: $*" >&2; status=1; }

mkdir -p "$tmp/bin" "$tmp/boot"
# go first in PATH is too old: go_ok fails.
printf '#!/bin/sh\necho "go: fake Go 1.19" >&2\nexit 1\n' >"$tmp/bin/go"
printf '#!/bin/sh\n[ "$1" = -u ] && { echo 0; exit 0; }\nexec /usr/bin/id "$@"\n' >"$tmp/bin/id"
printf '#!/bin/sh\necho amd64\n' >"$tmp/bin/dpkg"
printf '#!/bin/sh\necho "apt-get $*" >>%s/apt.log\n' "$tmp" >"$tmp/bin/apt-get"
# The bootstrap go: FAKE_FETCH=fail reports the proxy's error as Go does.
cat >"$tmp/boot/go" <<'EOF'
#!/bin/sh
case "$1 $2" in
"env GOPROXY") echo https://proxy.golang.org,direct; exit 0 ;;
"mod download") ;;
*) exit 2 ;;
esac
mod=$4
if [ "$FAKE_FETCH" = fail ]; then
	cat <<EOJ
{
	"Path": "golang.org/toolchain",
	"Version": "${mod#*@}",
	"Error": "golang.org/toolchain@${mod#*@}: Get \"https://proxy.golang.org/golang.org/toolchain/@v/list\": dial tcp: lookup proxy.golang.org: no such host"
}
EOJ
	exit 1
fi
dir=$GOMODCACHE/$mod
mkdir -p "$dir/bin" "$dir/pkg/tool/linux_amd64"
printf '#!/bin/sh\necho "go version go1.26.8 (fake) $*"\n' >"$dir/bin/go"
printf 'tool\n' >"$dir/pkg/tool/linux_amd64/compile"
chmod 444 "$dir/bin/go"
cat <<EOJ
{
	"Path": "golang.org/toolchain",
	"Version": "${mod#*@}",
	"Dir": "$dir",
	"GoMod": "$GOMODCACHE/cache/download/golang.org/toolchain/@v/x.mod"
}
EOJ
EOF
chmod +x "$tmp/bin/"* "$tmp/boot/go"

deps() {
	mkdir -p "$tmp/t"
	env PATH="$tmp/bin:$PATH" TMPDIR="$tmp/t" PUREVERBS_GOROOT="$tmp/local/go" \
		PUREVERBS_BOOTSTRAP_GO="$tmp/boot/go" "$@" scripts/deps.sh >"$tmp/out" 2>&1
}
mkdir -p "$tmp/local/go/bin"
echo old >"$tmp/local/go/bin/marker"

if deps FAKE_FETCH=fail; then
	fail "deps.sh exited 0 when the toolchain could not be fetched"
fi
grep -q "no such host" "$tmp/out" || fail "deps.sh does not print go mod download's error: $(cat "$tmp/out")"
grep -q "GOPROXY=https://proxy.golang.org,direct" "$tmp/out" || fail "deps.sh does not name GOPROXY: $(cat "$tmp/out")"
[ -f "$tmp/local/go/bin/marker" ] || fail "a failed fetch removed the Go installed before"
[ -z "$(ls -A "$tmp/t")" ] || fail "a failed fetch left temporary files: $(ls -A "$tmp/t")"

deps FAKE_FETCH=ok || fail "deps.sh failed with the toolchain fetched: $(cat "$tmp/out")"
[ -x "$tmp/local/go/bin/go" ] || fail "no executable $tmp/local/go/bin/go after the install"
[ -x "$tmp/local/go/pkg/tool/linux_amd64/compile" ] || fail "the tools under pkg/tool are not executable"
[ ! -e "$tmp/local/go/bin/marker" ] || fail "the old Go tree was not replaced whole"
[ "$(stat -c %a "$tmp/local/go")" = 755 ] || fail "$tmp/local/go has mode $(stat -c %a "$tmp/local/go"), want 755"
left=$(ls -A "$tmp/local" | grep -v '^go$' || true)
[ -z "$left" ] || fail "the install left $left beside go"
[ -z "$(ls -A "$tmp/t")" ] || fail "the install left temporary files: $(ls -A "$tmp/t")"
grep -q "go version go1.26.8 (fake)" "$tmp/out" || fail "deps.sh did not run the installed go: $(cat "$tmp/out")"

# An install interrupted between its renames: no go, the old tree beside.
rm -rf "$tmp/local/go"
mkdir -p "$tmp/local/go.old.123/bin"
echo old >"$tmp/local/go.old.123/bin/marker"
deps FAKE_FETCH=fail || true
[ -f "$tmp/local/go/bin/marker" ] || fail "the old tree left by an interrupted install was not put back: $(ls -A "$tmp/local")"

if [ "$status" = 0 ]; then
	echo "check-deps: ok (a failed toolchain fetch is explained and changes nothing; a fetched one is installed whole)"
fi
exit "$status"
