#!/bin/sh
# zooid-image.sh — build the zooid image compose.yaml runs, without any image registry.
#
#   docker/zooid-image.sh [TAG]     build TAG (default zooid:local) from this checkout
#
# docker/Dockerfile compiles zooid in a Go image and runs it on a Debian image, both pulled
# from a registry. Where none is reachable, this script makes the same daemon image from
# nothing but Go and this checkout: a static zooid (CGO_ENABLED=0), a root filesystem
# holding it, a passwd entry for user zooid (uid 10001) with /var/lib/zooid as its home,
# /tmp, and this machine's CA bundle (for an https homeserver), imported with
# `docker import` (python3 writes the archive). The image has no shell and no libc: enough for zooid and the demo
# agent (preset demo), which is zooid itself. A real agent's adapter needs an image of
# your own (docker/README.md). Then start compose without --build, so it uses this image.
set -eu

TAG=${1:-zooid:local}
UID_ZOOID=10001

say() { printf 'zooid-image.sh: %s\n' "$*" >&2; }

case "$TAG" in
-h | --help)
	sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
	exit 0
	;;
esac

if ! docker info >/dev/null 2>&1; then
	say "no Docker engine answers; run docker/engine.sh start first"
	exit 1
fi

repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT INT TERM
root=$work/root
mkdir -p "$root/usr/local/bin" "$root/etc/ssl/certs" "$root/etc/zooid" "$root/var/lib/zooid" "$root/tmp"

say "building a static zooid"
(cd "$repo" && CGO_ENABLED=0 go build -tags goolm -trimpath -ldflags="-s -w" -o "$root/usr/local/bin/zooid" ./cmd/zooid)

printf 'root:x:0:0:root:/root:/sbin/nologin\nzooid:x:%d:%d:zooid:/var/lib/zooid:/sbin/nologin\n' "$UID_ZOOID" "$UID_ZOOID" >"$root/etc/passwd"
printf 'root:x:0:\nzooid:x:%d:\n' "$UID_ZOOID" >"$root/etc/group"
if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
	cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/"
else
	say "no /etc/ssl/certs/ca-certificates.crt here: the image trusts no CA (fine for an http homeserver)"
fi
chmod 1777 "$root/tmp"

# Everything belongs to root but zooid's home, which a named volume mounted there copies
# with its owner. Python's tarfile sets owners per entry, so no root is needed here (GNU
# tar sets one owner for all, and the engine refuses an archive naming a path twice).
python3 - "$root" "$work/image.tar" "$UID_ZOOID" <<'PY'
import sys, tarfile
root, out, uid = sys.argv[1], sys.argv[2], int(sys.argv[3])
def own(ti):
    ti.uid = ti.gid = uid if ti.name == "./var/lib/zooid" else 0
    ti.uname = ti.gname = ""
    return ti
with tarfile.open(out, "w") as t:
    t.add(root, arcname=".", filter=own)
PY

say "importing $TAG"
docker import \
	--change "USER zooid" \
	--change "WORKDIR /var/lib/zooid" \
	--change "ENV PATH=/usr/local/bin" \
	--change 'ENTRYPOINT ["/usr/local/bin/zooid"]' \
	--change 'CMD ["run", "--config", "/etc/zooid/zooid.yaml"]' \
	"$work/image.tar" "$TAG" >/dev/null
say "built $TAG ($(du -h "$root/usr/local/bin/zooid" | cut -f1) zooid)"
