#!/usr/bin/env bash
# A one-machine Slurm 22.05 cluster for developing and testing the DSFRO Slurm adapter
# (dsfro-slurm): munged, slurmctld and one slurmd per node, every node with fake GPUs (GRES
# device files are symlinks to /dev/null, which Slurm accepts as character devices). Starts in
# under a second; root or not. docs/integrations.md shows how to use it.
#
#   scripts/slurm-dev-cluster.sh install        # apt-get the Debian packages (root, or sudo)
#   scripts/slurm-dev-cluster.sh start  [DIR]   # DIR: default ${TMPDIR:-/tmp}/dsfro-slurm
#   scripts/slurm-dev-cluster.sh stop   [DIR]
#   scripts/slurm-dev-cluster.sh status [DIR]
#   source DIR/env                               # SLURM_CONF for sinfo, squeue, sbatch, ...
#
# Settings (environment): SLURM_CI_NODES (4), SLURM_CI_GPUS per node (8), SLURM_CI_GPU_TYPE
# (h100), SLURM_CI_CRED_EXPIRE (10 s, at least 5: Slurm takes a smaller one as 120; a requeued
# job waits this + 1 s before it starts again),
# SLURM_CI_KILL_WAIT (5 s between SIGTERM and SIGKILL), SLURM_CI_PORT (16817: slurmctld; the
# slurmds take SLURM_CI_PORT+184 onwards). Every client call is wrapped in `timeout`: when
# slurmctld is gone, Slurm's clients retry for minutes.
set -euo pipefail
CMD=${1:?usage: $0 install|start|stop|status [DIR]}
B=${2:-${TMPDIR:-/tmp}/dsfro-slurm}
N=${SLURM_CI_NODES:-4}
GPUS=${SLURM_CI_GPUS:-8}
TYPE=${SLURM_CI_GPU_TYPE:-h100}
CRED=${SLURM_CI_CRED_EXPIRE:-10}
KILLWAIT=${SLURM_CI_KILL_WAIT:-5}
PORT=${SLURM_CI_PORT:-16817}
NODEPORT=$((PORT + 184))
ME=$(id -un)
[ "$CRED" -ge 5 ] || { echo "SLURM_CI_CRED_EXPIRE must be >= 5 (Slurm ignores less)" >&2; exit 2; }
PACKAGES="slurmctld slurmd slurm-client munge"
export PATH=/usr/sbin:/sbin:$PATH
export SLURM_CONF=$B/etc/slurm.conf

_stop() {  # kill the processes of the pid files, wait until they are gone (zombies count as gone)
  local p f alive
  for f in "$@"; do p=$(cat "$f" 2>/dev/null) && kill "$p" 2>/dev/null || true; done
  for _ in $(seq 1 100); do
    alive=0
    for f in "$@"; do
      p=$(cat "$f" 2>/dev/null) || continue
      [ -e "/proc/$p" ] && [ "$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null)" != Z ] && alive=1
    done
    [ $alive = 0 ] && return 0
    sleep 0.1
  done
  echo "still running: $*" >&2
}

case $CMD in
install)
  if command -v slurmctld >/dev/null && command -v slurmd >/dev/null \
     && command -v sinfo >/dev/null && command -v munged >/dev/null; then
    echo "Slurm is installed: $(slurmctld -V)"; exit 0
  fi
  SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends $PACKAGES
  slurmctld -V ;;
start)
  if [ -f "$B/run/slurmctld.pid" ] && kill -0 "$(cat "$B/run/slurmctld.pid")" 2>/dev/null; then
    echo "already running in $B (stop it first)" >&2; exit 1
  fi
  mkdir -p "$B"/{etc,state,spool,log,run,dev} && mkdir -p -m 700 "$B/munge"
  for i in $(seq 0 $((GPUS - 1))); do ln -sf /dev/null "$B/dev/gpu$i"; done
  [ -f "$B/munge/munge.key" ] || mungekey -c -k "$B/munge/munge.key"
  cat > "$B/etc/slurm.conf" <<EOF
ClusterName=dsfro-dev
SlurmctldHost=localhost
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
SlurmUser=$ME
SlurmdUser=$ME
AuthType=auth/munge
AuthInfo=socket=$B/run/munge.socket,cred_expire=$CRED
CredType=cred/munge
StateSaveLocation=$B/state
SlurmdSpoolDir=$B/spool/%n
SlurmctldPidFile=$B/run/slurmctld.pid
SlurmdPidFile=$B/run/slurmd-%n.pid
SlurmctldLogFile=$B/log/slurmctld.log
SlurmdLogFile=$B/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerNode=1000
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1
GresTypes=gpu
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
MinJobAge=300
KillWait=$KILLWAIT
SlurmdTimeout=30
NodeName=node[1-$N] NodeHostname=localhost NodeAddr=127.0.0.1 Port=[$NODEPORT-$((NODEPORT + N - 1))] CPUs=32 RealMemory=64000 Gres=gpu:$TYPE:$GPUS State=UNKNOWN
PartitionName=gpu Nodes=node[1-$N] Default=YES MaxTime=INFINITE State=UP
EOF
  cat > "$B/etc/gres.conf" <<EOF
AutoDetect=off
NodeName=node[1-$N] Name=gpu Type=$TYPE File=$B/dev/gpu[0-$((GPUS - 1))]
EOF
  echo "export SLURM_CONF=$B/etc/slurm.conf" > "$B/env"
  munged --key-file="$B/munge/munge.key" --socket="$B/run/munge.socket" \
         --pid-file="$B/run/munged.pid" --log-file="$B/log/munged.log" \
         --seed-file="$B/munge/munged.seed"
  slurmctld -i            # -i: start without saved state
  for n in $(seq 1 "$N"); do mkdir -p "$B/spool/node$n"; slurmd -N "node$n"; done
  for _ in $(seq 1 600); do
    p=$(cat "$B/run/slurmctld.pid" 2>/dev/null) && ! kill -0 "$p" 2>/dev/null && {
      tail -5 "$B/log/slurmctld.log" >&2; exit 1; }
    if [ "$(timeout 5 sinfo -h -o %T 2>/dev/null | sort -u)" = idle ]; then
      timeout 5 sinfo; echo "Slurm is up: source $B/env"; exit 0
    fi
    sleep 0.1
  done
  echo "the cluster did not become idle" >&2; timeout 5 sinfo -R >&2 || true; exit 1 ;;
stop)  # slurmds first (while slurmctld is up: faster), then slurmctld, then munged
  [ -f "$B/etc/slurm.conf" ] || { echo "no cluster in $B" >&2; exit 0; }
  # Jobs first, or slurmstepd and the jobs' processes outlive slurmd.
  timeout 10 scancel --partition gpu 2>/dev/null && sleep 1 || true
  _stop "$B"/run/slurmd-*.pid
  _stop "$B/run/slurmctld.pid"
  _stop "$B/run/munged.pid" ;;
status)
  timeout 5 sinfo && timeout 5 squeue ;;
*)
  echo "usage: $0 install|start|stop|status [DIR]" >&2; exit 2 ;;
esac
