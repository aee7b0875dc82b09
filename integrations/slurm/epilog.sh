#!/bin/bash
# greentrain Slurm Epilog (slurm.conf: Epilog=/etc/slurm/greentrain-epilog.sh), run by slurmd as root.
#
# Restores the power limit the prolog journaled for each of the job's GPUs and
# removes the journal entry once the GPU reports the restored value. A GPU whose
# restore fails keeps its journal, so the next job's epilog retries it. Always
# exits 0 (a failing epilog drains the node); problems go to the log.
set -u
export PATH="${PATH:-/usr/sbin:/usr/bin:/sbin:/bin}"
conf="${GREENTRAIN_SLURM_CONF:-/etc/greentrain/slurm.env}"
# shellcheck source=/dev/null
[ -r "$conf" ] && . "$conf"
nvidia_smi="${GREENTRAIN_NVIDIA_SMI:-nvidia-smi}"
journal_dir="${GREENTRAIN_JOURNAL_DIR:-/var/lib/greentrain/slurm}"
job="${SLURM_JOB_ID:-?}"

log() { echo "greentrain-epilog job $job: $*" >&2; logger -t greentrain-epilog -- "job $job: $*" 2>/dev/null || true; }

[ -z "${SLURM_JOB_GPUS:-}" ] && exit 0
IFS=',' read -r -a gpus <<< "$SLURM_JOB_GPUS"
for gpu in "${gpus[@]}"; do
  [[ "$gpu" =~ ^[0-9]+$ ]] || continue
  journal="$journal_dir/gpu-$gpu"
  [ -s "$journal" ] || continue
  read -r original _ < "$journal"
  [[ "$original" =~ ^[0-9]+$ ]] || { log "GPU $gpu: damaged journal $journal"; continue; }
  if out="$("$nvidia_smi" -i "$gpu" -pl "$original" 2>&1)"; then
    rm -f "$journal"
    log "GPU $gpu: power limit restored to ${original} W"
  else
    log "GPU $gpu: restoring ${original} W failed, journal kept: $out"
  fi
done
exit 0
