#!/usr/bin/env bash
# Build the Docker image the Docker rows of the tests run in (tests/docker/Containerfile),
# from a local Debian 12 root (no registry), unless it exists. Prints the image's name.
# Called by crates/rsandbox-cli/tests/docker.rs and the attack corpus's Docker rows; a few
# minutes the first time, instant after.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v docker >/dev/null || { echo "docker-test-env.sh: needs Docker Engine" >&2; exit 2; }
# The image's tag is the hash of its Containerfile: a changed recipe builds a new image.
tag=$(sha256sum tests/docker/Containerfile | cut -c1-12)
image=localhost/rsandbox-test-env:$tag
if ! docker image inspect "$image" >/dev/null 2>&1; then
  base=localhost/debian:12-minbase
  if ! docker image inspect "$base" >/dev/null 2>&1; then
    command -v debootstrap >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; }
    # The same local root scripts/container-check.sh and deploy/compose/up.sh use.
    rootfs="${XDG_CACHE_HOME:-$HOME/.cache}/rsandbox/debian12-rootfs"
    if [ ! -x "$rootfs/bin/bash" ]; then
      mirror=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || echo http://deb.debian.org/debian)
      debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >/dev/null
    fi
    tar -C "$rootfs" -c . | docker import - "$base" >/dev/null
  fi
  # --network host: apt inside the build reaches the machine's mirror as the host does.
  docker build --quiet --network host --build-arg BASE="$base" -f tests/docker/Containerfile -t "$image" tests/docker >/dev/null
fi
echo "$image"
