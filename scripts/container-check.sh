#!/usr/bin/env bash
# Build the rsandbox image (Containerfile) with the distribution's podman and run it as a
# non-root user with every capability dropped: under podman's default seccomp profile,
# and under a profile that refuses namespaces and mounts as Docker's default does. Prints
# what `check` says and what an evaluation does in each. Not part of scripts/test.sh: it
# installs podman and builds an image (a minute or two); the CI proof of the container
# rows is the emulated-environment tests (crates/rsandbox-cli/tests/container.rs and the
# attack corpus rows).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
need=()
for tool in podman runc debootstrap; do command -v "$tool" >/dev/null || need+=("$tool"); done
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
# This machine's kernel has hybrid cgroups (crun refuses them) and hard limits below
# podman's defaults.
podman=(podman --runtime runc --cgroup-manager cgroupfs)
run=("${podman[@]}" run --rm --ulimit nofile=1024:1024 --ulimit nproc=4096:4096 --cap-drop ALL --security-opt no-new-privileges --user 1000)

# A Debian 12 base image made locally (no registry needed), once.
base=localhost/debian:12-minbase
if ! "${podman[@]}" image exists "$base"; then
  rootfs="${XDG_CACHE_HOME:-$HOME/.cache}/rsandbox/debian12-rootfs"
  if [ ! -x "$rootfs/bin/bash" ]; then
    mirror=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || echo http://deb.debian.org/debian)
    debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >/dev/null
  fi
  tar -C "$rootfs" -c . | "${podman[@]}" import - "$base" >/dev/null
fi
cargo build --release --quiet -p rsandbox-cli -p rsandbox-zygote
"${podman[@]}" build --quiet --network host --build-arg BASE="$base" -f Containerfile -t localhost/rsandbox:dev . >/dev/null

# Docker's default profile, as far as rsandbox is concerned: no new namespaces (unshare,
# setns, clone with namespace flags), no mounts, clone3 unknown; everything else allowed.
profile=$(mktemp --suffix=.json)
trap 'rm -f "$profile"' EXIT
python3 - "$profile" <<'PY'
import json, sys
refused = ["unshare", "setns", "mount", "umount2", "pivot_root", "move_mount", "open_tree",
           "fsopen", "fsmount", "fspick", "mount_setattr"]
rules = [{"names": refused, "action": "SCMP_ACT_ERRNO", "errnoRet": 1},
         {"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38}]
# clone with any namespace flag: one masked comparison per flag (the JSON form has no
# "any bit of" operator).
for bit in [0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000]:
    rules.append({"names": ["clone"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1,
                  "args": [{"index": 0, "value": bit, "valueTwo": bit, "op": "SCMP_CMP_MASKED_EQ"}]})
json.dump({"defaultAction": "SCMP_ACT_ALLOW", "syscalls": rules}, open(sys.argv[1], "w"))
PY

status=0
step() {
  local name=$1 expect=$2; shift 2
  local out rc=0
  out=$("$@" 2>&1) || rc=$?
  printf '== %s (exit %s, expected %s)\n%s\n' "$name" "$rc" "$expect" "$out"
  [ "$rc" = "$expect" ] || status=1
}
step "podman default profile: check" 0 "${run[@]}" localhost/rsandbox:dev check
step "podman default profile: eval" 0 "${run[@]}" localhost/rsandbox:dev eval 'sum(1:10)'
step "podman default profile: system('id')" 9 "${run[@]}" localhost/rsandbox:dev eval "system('id')"
step "Docker-like profile: check" 1 "${run[@]}" --security-opt seccomp="$profile" localhost/rsandbox:dev check
step "Docker-like profile: eval (refused, names the option)" 11 "${run[@]}" --security-opt seccomp="$profile" localhost/rsandbox:dev eval 'sum(1:10)'
step "Docker-like profile: check --no-namespaces" 0 "${run[@]}" --security-opt seccomp="$profile" localhost/rsandbox:dev check --no-namespaces
step "Docker-like profile: eval --no-namespaces" 0 "${run[@]}" --security-opt seccomp="$profile" localhost/rsandbox:dev eval --no-namespaces 'sum(1:10)'
step "Docker-like profile: system('id') --no-namespaces" 9 "${run[@]}" --security-opt seccomp="$profile" localhost/rsandbox:dev eval --no-namespaces "system('id')"
# Root in the container (podman's default capabilities: no CAP_SYS_ADMIN): each sandbox
# becomes its own uid, then takes a user namespace as an ordinary user does.
root_run=("${podman[@]}" run --rm --ulimit nofile=1024:1024 --ulimit nproc=4096:4096 --security-opt no-new-privileges --user 0)
step "podman default profile, root: check (namespaces user, net, ipc, uts; own uid)" 0 "${root_run[@]}" localhost/rsandbox:dev check
step "podman default profile, root: eval" 0 "${root_run[@]}" localhost/rsandbox:dev eval 'sum(1:10)'
step "podman default profile, root --cap-drop ALL: refused, names --user" 11 "${root_run[@]}" --cap-drop ALL localhost/rsandbox:dev eval 'sum(1:10)'
# Learning reads the sandbox's paths from /proc/PID/mem; podman's profile refuses
# process_vm_readv without CAP_SYS_PTRACE.
job="suppressWarnings(tryCatch(readLines('/etc/hostname'), error = function(e) 'none'))"
step "podman default profile: learn (prints read = [\"/etc/hostname\"])" 0 "${run[@]}" -i localhost/rsandbox:dev learn - <<<"$job"
step "Docker-like profile: learn --no-namespaces" 0 "${run[@]}" -i --security-opt seccomp="$profile" localhost/rsandbox:dev learn --no-namespaces - <<<"$job"
echo "container-check: $([ $status = 0 ] && echo passed || echo FAILED)"
exit $status
