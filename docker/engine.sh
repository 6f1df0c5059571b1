#!/bin/sh
# engine.sh — make a Docker engine answer on this machine, and stop it again.
#
#   docker/engine.sh start    install Debian's docker.io if dockerd is missing, then start
#                             dockerd when no engine answers yet (idempotent)
#   docker/engine.sh stop     stop the dockerd that `start` started — and nothing else
#   docker/engine.sh status   exit 0 when an engine answers
#
# The engine runs without a bridge, iptables or masquerading: test containers use host
# networking, so everything stays on 127.0.0.1 and the host's firewall is left alone.
#
# State lives in $ZOOID_DOCKER_STATE (default /tmp/zooid-docker): dockerd.log, dockerd.pid.
# A pidfile is only written for an engine this script started; `stop` refuses to touch an
# engine it did not start.
set -eu

STATE=${ZOOID_DOCKER_STATE:-/tmp/zooid-docker}
PIDFILE=$STATE/dockerd.pid
LOG=$STATE/dockerd.log
WAIT_SECONDS=${ZOOID_DOCKER_WAIT:-60}

say() { printf 'engine.sh: %s\n' "$*" >&2; }

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

answers() {
	command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1
}

install_engine() {
	say "dockerd is missing; installing Debian's docker.io"
	as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker.io
}

start() {
	if answers; then
		say "an engine already answers; nothing to start"
		return 0
	fi
	command -v dockerd >/dev/null 2>&1 || install_engine
	mkdir -p "$STATE"
	if [ -f "$PIDFILE" ] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
		say "dockerd $(cat "$PIDFILE") is running but not answering yet; waiting"
	else
		say "starting dockerd (log: $LOG)"
		rm -f "$PIDFILE"
		# dockerd writes its own pid to $PIDFILE, so the file names the engine itself
		# and not a wrapper (sudo, setsid, a subshell). setsid: the engine must outlive
		# this shell, and a Ctrl-C in the caller's terminal must not reach it.
		as_root setsid dockerd --bridge=none --iptables=false --ip-masq=false \
			--pidfile "$PIDFILE" >>"$LOG" 2>&1 </dev/null &
		i=0
		while [ ! -s "$PIDFILE" ]; do
			i=$((i + 1))
			if [ "$i" -gt "$WAIT_SECONDS" ]; then
				say "dockerd wrote no pidfile within ${WAIT_SECONDS}s; last log lines:"
				tail -n 20 "$LOG" >&2 || true
				return 1
			fi
			sleep 1
		done
	fi
	i=0
	while ! answers; do
		i=$((i + 1))
		if [ "$i" -gt "$WAIT_SECONDS" ]; then
			say "dockerd did not answer within ${WAIT_SECONDS}s; last log lines:"
			tail -n 20 "$LOG" >&2 || true
			return 1
		fi
		if ! kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
			say "dockerd exited; last log lines:"
			tail -n 20 "$LOG" >&2 || true
			return 1
		fi
		sleep 1
	done
	say "engine answers (pid $(cat "$PIDFILE"))"
}

stop() {
	if [ ! -f "$PIDFILE" ]; then
		say "no engine was started by engine.sh; nothing to stop"
		return 0
	fi
	pid=$(cat "$PIDFILE")
	if kill -0 "$pid" 2>/dev/null; then
		say "stopping dockerd $pid"
		as_root kill -TERM "$pid"
		i=0
		while kill -0 "$pid" 2>/dev/null; do
			i=$((i + 1))
			if [ "$i" -gt 30 ]; then
				say "dockerd $pid still running after 30s; sending KILL"
				as_root kill -KILL "$pid" 2>/dev/null || true
				break
			fi
			sleep 1
		done
	else
		say "dockerd $pid is already gone"
	fi
	rm -f "$PIDFILE"
}

case "${1:-}" in
start) start ;;
stop) stop ;;
status) answers ;;
*)
	echo "usage: $0 start|stop|status" >&2
	exit 2
	;;
esac
