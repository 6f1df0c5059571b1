#!/bin/sh
# synapse-image.sh — build the Synapse image the tests run, without any image registry.
#
#   docker/synapse-image.sh            build zooid-synapse:local unless it already exists
#   docker/synapse-image.sh --force    rebuild it
#
# Synapse is packaged only in Debian sid, so the image is a sid root filesystem made with
# mmdebstrap (matrix-synapse, curl, ca-certificates) and turned into an image with
# `docker import`. The Debian mirror is the one this machine's apt already uses (the URIs:
# line of /etc/apt/sources.list.d/debian.sources, or $ZOOID_DEBIAN_MIRROR).
#
# When ZOOID_SYNAPSE_IMAGE names another image (for example matrixdotorg/synapse where a
# registry is reachable), this script does nothing: that image is pulled by the engine.
# See docker/README.md for what such an image must provide.
set -eu

IMAGE=zooid-synapse:local
SUITE=${ZOOID_DEBIAN_SUITE:-sid}
FORCE=0

say() { printf 'synapse-image.sh: %s\n' "$*" >&2; }

for arg in "$@"; do
	case "$arg" in
	--force) FORCE=1 ;;
	-h | --help)
		sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
		exit 0
		;;
	*)
		say "unknown argument: $arg"
		exit 2
		;;
	esac
done

if [ -n "${ZOOID_SYNAPSE_IMAGE:-}" ] && [ "$ZOOID_SYNAPSE_IMAGE" != "$IMAGE" ]; then
	say "ZOOID_SYNAPSE_IMAGE=$ZOOID_SYNAPSE_IMAGE; not building $IMAGE"
	exit 0
fi

if ! docker info >/dev/null 2>&1; then
	say "no Docker engine answers; run docker/engine.sh start first"
	exit 1
fi

if [ "$FORCE" = 0 ] && docker image inspect "$IMAGE" >/dev/null 2>&1; then
	say "$IMAGE exists; reusing it (--force rebuilds)"
	exit 0
fi

as_root() {
	if [ "$(id -u)" = 0 ]; then
		"$@"
	elif command -v sudo >/dev/null 2>&1; then
		sudo "$@"
	else
		say "need root for: $*"
		return 1
	fi
}

mirror() {
	if [ -n "${ZOOID_DEBIAN_MIRROR:-}" ]; then
		echo "$ZOOID_DEBIAN_MIRROR"
		return
	fi
	src=/etc/apt/sources.list.d/debian.sources
	if [ -r "$src" ]; then
		# The first URIs: line is the main archive (the security archive comes later).
		m=$(sed -n 's/^URIs:[[:space:]]*\([^[:space:]]*\).*/\1/p' "$src" | head -n 1)
		if [ -n "$m" ]; then
			echo "$m"
			return
		fi
	fi
	if [ -r /etc/apt/sources.list ]; then
		m=$(sed -n 's/^deb[[:space:]]\{1,\}\(\[[^]]*\][[:space:]]\{1,\}\)\{0,1\}\([^[:space:]]*\).*/\2/p' \
			/etc/apt/sources.list | grep -v security | head -n 1)
		if [ -n "$m" ]; then
			echo "$m"
			return
		fi
	fi
	say "cannot find a Debian mirror in $src or /etc/apt/sources.list; set ZOOID_DEBIAN_MIRROR"
	return 1
}

if ! command -v mmdebstrap >/dev/null 2>&1; then
	say "mmdebstrap is missing; installing it"
	as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q mmdebstrap
fi

old=$(docker image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null || true)
MIRROR=$(mirror)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/zooid-synapse-rootfs.XXXXXX")
# The rootfs belongs to root (mode=root), so it is removed as root, on every exit path.
trap 'as_root rm -rf "$WORK"' EXIT INT TERM

start=$(date +%s)
say "building $IMAGE from Debian $SUITE ($MIRROR)"
# Check-Valid-Until: the mirror's sid Release file may be older than this machine's clock.
as_root mmdebstrap --mode=root --variant=apt \
	--aptopt='Acquire::Check-Valid-Until "false"' \
	--include=matrix-synapse,curl,ca-certificates \
	"$SUITE" "$WORK/rootfs" "deb $MIRROR $SUITE main"

# Drop apt's package lists and caches: they are a third of the size and never used at run time.
as_root rm -rf "$WORK/rootfs/var/lib/apt/lists" "$WORK/rootfs/var/cache/apt"
as_root mkdir -p "$WORK/rootfs/var/lib/apt/lists/partial"

as_root tar -C "$WORK/rootfs" -c . | docker import \
	--change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
	--change 'WORKDIR /data' \
	--change 'CMD ["synapse_homeserver", "-c", "/data/homeserver.yaml"]' \
	--message "zooid: Synapse from Debian $SUITE" \
	- "$IMAGE" >/dev/null

if [ -n "$old" ] && [ "$old" != "$(docker image inspect --format '{{.Id}}' "$IMAGE")" ]; then
	# The replaced image is only kept while a container still uses it.
	docker image rm "$old" >/dev/null 2>&1 || say "previous image $old is still in use; left in place"
fi

version=$(docker run --rm --network none "$IMAGE" \
	python3 -c 'import synapse; print(synapse.__version__)' 2>/dev/null || echo unknown)
say "built $IMAGE (Synapse $version) in $(($(date +%s) - start))s"
