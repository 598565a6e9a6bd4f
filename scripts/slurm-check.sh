#!/usr/bin/env bash
# Grade 2 000 small submissions on a one-node Slurm on this machine (Debian's slurm-wlm,
# slurmctld + slurmd + munge, started here and stopped at the end) with
# deploy/slurm/grade.sbatch, one shard per array task, then merge the shards and check
# that every file has exactly one result. Prints the merge summary and the time. Needs
# root (it writes /etc/slurm and starts the daemons). Not part of scripts/test.sh: it
# installs Slurm; about a minute of grading on two cores.
#   scripts/slurm-check.sh [FILES] [SHARDS]
set -euo pipefail
cd "$(dirname "$0")/.."
files=${1:-2000}
shards=${2:-8}
export PATH="$HOME/.cargo/bin:$PATH"
[ "$(id -u)" -eq 0 ] || { echo "slurm-check: run as root (it configures and starts Slurm)" >&2; exit 2; }
command -v slurmctld >/dev/null && command -v munged >/dev/null || {
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null
}
cargo build --quiet -p rsandbox-cli -p rsandbox-zygote
export RSANDBOX="$PWD/target/debug/rsandbox"

work=$(mktemp -d /tmp/rsandbox-slurm.XXXXXX)
chmod 755 "$work"
host=$(hostname -s)
cpus=$(nproc)
memory=$(awk '/MemTotal/ {print int($2 / 1024 * 0.9)}' /proc/meminfo)
stop() {
  [ -f "$work/slurmd.pid" ] && kill "$(cat "$work/slurmd.pid")" 2>/dev/null || true
  [ -f "$work/slurmctld.pid" ] && kill "$(cat "$work/slurmctld.pid")" 2>/dev/null || true
  [ -f "$work/munged.pid" ] && kill "$(cat "$work/munged.pid")" 2>/dev/null || true
  sleep 1
  rm -rf "$work"
}
trap stop EXIT

# munge: a key of this run's own, its socket in the work directory.
mkdir -p "$work/munge" && chmod 700 "$work/munge"
dd if=/dev/urandom of="$work/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$work/munge/munge.key"
munged --force --key-file "$work/munge/munge.key" --socket "$work/munge/socket" \
  --pid-file "$work/munged.pid" --log-file "$work/munge/log" --seed-file "$work/munge/seed"

# One node, one partition; processes tracked by the process tree (this machine's cgroups
# are hybrid, so no cgroup plugin).
mkdir -p "$work/spool" "$work/state"
cat >"$work/slurm.conf" <<CONF
ClusterName=rsandbox-check
SlurmctldHost=$host
AuthType=auth/munge
AuthInfo=socket=$work/munge/socket
CryptoType=crypto/munge
SlurmUser=root
SlurmctldPort=16817
SlurmdPort=16818
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
MpiDefault=none
SchedulerType=sched/backfill
MaxArraySize=10001
NodeName=$host CPUs=$cpus RealMemory=$memory State=UNKNOWN
PartitionName=check Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF="$work/slurm.conf"
slurmctld -i
slurmd
for _ in $(seq 60); do
  sinfo -h -o %T 2>/dev/null | grep -qE '^(idle|mixed)' && break
  sleep 1
done
sinfo -h -o '%P %D %T' | grep -qE 'idle|mixed' || { echo "slurm-check: the node did not come up"; cat "$work/slurmd.log"; exit 1; }

# Submissions: most correct, some wrong, a few hostile (exec, reading a secret).
subs="$work/submissions" results="$work/results"
mkdir -p "$subs"
for i in $(seq -w 1 "$files"); do
  case $((10#$i % 50)) in
    7) echo "stop('wrong answer in $i')" ;;
    13) echo "system('id')" ;;
    29) echo "readLines('/etc/shadow')" ;;
    *) echo "x <- $((10#$i)); stopifnot(sum(seq_len(x)) == x * (x + 1) / 2); cat(x)" ;;
  esac >"$subs/student-$i.R"
done
chmod -R a+rX "$work"

start=$(date +%s.%N)
sbatch --wait --quiet --array="1-$shards" --output="$work/task-%a.log" deploy/slurm/grade.sbatch "$subs" "$results"
graded=$(date +%s.%N)
status=0
python3 deploy/slurm/merge.py "$subs" "$results" || status=$?
echo "slurm-check: $files files in $shards array tasks graded in $(awk -v a="$start" -v b="$graded" 'BEGIN {printf "%.1f", b - a}') s (submit to last task done); merge exit $status"
# The expected outcome: complete, and the worst status a violation (9).
[ "$status" -eq 9 ] && echo "slurm-check: passed" || { echo "slurm-check: FAILED"; tail -n 20 "$work"/task-*.log; exit 1; }
