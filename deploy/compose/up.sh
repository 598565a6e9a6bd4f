#!/usr/bin/env bash
# Build the images (from a local Debian 12 root: no registry needed) and start
# deploy/compose: HAProxy on 127.0.0.1:18080 in front of three rsandbox replicas.
#   deploy/compose/up.sh            release binaries (RSANDBOX_PROFILE=debug: debug ones)
# Writes deploy/compose/tokens (NAME:TOKEN, uid 1000, 0600) once; the load test reads it.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$HOME/.cargo/bin:$PATH"
profile=${RSANDBOX_PROFILE:-release}
command -v docker >/dev/null || { echo "up.sh: needs Docker Engine with Compose" >&2; exit 2; }
# Compose as a docker plugin, else the standalone docker-compose (Debian's package).
if docker compose version >/dev/null 2>&1; then compose=(docker compose); else compose=(docker-compose); fi
compose+=(-p rsandbox -f deploy/compose/compose.yaml)
command -v debootstrap >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; }

base=localhost/debian:12-minbase
if ! docker image inspect "$base" >/dev/null 2>&1; then
  # The same local root scripts/container-check.sh makes for podman.
  rootfs="${XDG_CACHE_HOME:-$HOME/.cache}/rsandbox/debian12-rootfs"
  if [ ! -x "$rootfs/bin/bash" ]; then
    mirror=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || echo http://deb.debian.org/debian)
    debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >/dev/null
  fi
  tar -C "$rootfs" -c . | docker import - "$base" >/dev/null
fi
if [ "$profile" = release ]; then
  cargo build --release --quiet -p rsandbox-cli -p rsandbox-zygote
else
  cargo build --quiet -p rsandbox-cli -p rsandbox-zygote
fi
# --network host: apt inside the build reaches the machine's mirror as the host does.
docker build --quiet --network host --build-arg BASE="$base" --build-arg PROFILE="$profile" \
  -f Containerfile -t localhost/rsandbox:dev . >/dev/null
docker build --quiet --network host --build-arg BASE="$base" \
  -f deploy/compose/Containerfile.balancer -t localhost/rsandbox-balancer:dev deploy/compose >/dev/null

tokens=deploy/compose/tokens
if [ ! -s "$tokens" ]; then
  # Eight clients' tokens (the load test gives each client its own).
  (umask 077; for i in $(seq 8); do echo "client$i:$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"; done >"$tokens")
fi
chown 1000:1000 "$tokens" && chmod 600 "$tokens"
"${compose[@]}" up -d --remove-orphans --force-recreate
for _ in $(seq 60); do
  curl -fsS -o /dev/null http://127.0.0.1:18080/readyz 2>/dev/null && break
  sleep 1
done
curl -fsS http://127.0.0.1:18080/readyz >/dev/null || { "${compose[@]}" logs --tail 30; echo "up.sh: not ready" >&2; exit 1; }
echo "up.sh: ready on http://127.0.0.1:18080 ($("${compose[@]}" ps -q rsandbox | wc -l) replicas)"
