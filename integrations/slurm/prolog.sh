#!/bin/bash
# greentrain Slurm Prolog (slurm.conf: Prolog=/etc/slurm/greentrain-prolog.sh), run by slurmd as root.
#
# Sets the power limit of the GPUs allocated to the job (SLURM_JOB_GPUS). The
# limit comes from the job comment (`greentrain submit --power-limit-w 250`
# writes `power_limit_w=250` there) or, failing that, from the site default
# GREENTRAIN_POWER_LIMIT_W in $GREENTRAIN_SLURM_CONF (/etc/greentrain/slurm.env).
# It is clamped to what each GPU allows. Before touching a GPU the original
# limit is journaled in $GREENTRAIN_JOURNAL_DIR/gpu-<index>; the epilog restores
# it. A journal left by a job whose epilog never ran is kept, so the pristine
# value is what gets restored, never a leftover.
#
# A failing prolog drains the node, so every problem here is logged and the
# job still runs at the GPU's current limit: exit status is always 0.
set -u
export PATH="${PATH:-/usr/sbin:/usr/bin:/sbin:/bin}"
conf="${GREENTRAIN_SLURM_CONF:-/etc/greentrain/slurm.env}"
# shellcheck source=/dev/null
[ -r "$conf" ] && . "$conf"
nvidia_smi="${GREENTRAIN_NVIDIA_SMI:-nvidia-smi}"
journal_dir="${GREENTRAIN_JOURNAL_DIR:-/var/lib/greentrain/slurm}"
job="${SLURM_JOB_ID:-?}"

log() { echo "greentrain-prolog job $job: $*" >&2; logger -t greentrain-prolog -- "job $job: $*" 2>/dev/null || true; }

requested=""
if [[ "${SLURM_JOB_COMMENT:-}" =~ (^|[^A-Za-z0-9_])power_limit_w=([0-9]+)([^0-9]|$) ]]; then
  requested="${BASH_REMATCH[2]}"
elif [[ "${GREENTRAIN_POWER_LIMIT_W:-}" =~ ^[0-9]+$ ]]; then
  requested="$GREENTRAIN_POWER_LIMIT_W"
fi
[ -z "$requested" ] && exit 0
[ -z "${SLURM_JOB_GPUS:-}" ] && exit 0
mkdir -p -m 0700 "$journal_dir" || { log "cannot create $journal_dir"; exit 0; }

IFS=',' read -r -a gpus <<< "$SLURM_JOB_GPUS"
for gpu in "${gpus[@]}"; do
  [[ "$gpu" =~ ^[0-9]+$ ]] || { log "skipping GPU index '$gpu'"; continue; }
  reading="$("$nvidia_smi" -i "$gpu" --query-gpu=power.limit,power.min_limit,power.max_limit \
    --format=csv,noheader,nounits 2>&1)" || { log "GPU $gpu: cannot read power limits: $reading"; continue; }
  IFS=', ' read -r current min_w max_w <<< "$reading"
  current="${current%.*}"; min_w="${min_w%.*}"; max_w="${max_w%.*}"
  [[ "$current$min_w$max_w" =~ ^[0-9]+$ ]] || { log "GPU $gpu: unexpected reading '$reading'"; continue; }
  target="$requested"
  (( target < min_w )) && target="$min_w"
  (( target > max_w )) && target="$max_w"
  journal="$journal_dir/gpu-$gpu"
  if [ ! -s "$journal" ]; then
    printf '%s %s\n' "$current" "$job" > "$journal.tmp" && mv "$journal.tmp" "$journal" \
      || { log "GPU $gpu: cannot journal, leaving it alone"; continue; }
  fi
  if out="$("$nvidia_smi" -i "$gpu" -pl "$target" 2>&1)"; then
    log "GPU $gpu: power limit ${current} W -> ${target} W"
  else
    log "GPU $gpu: setting ${target} W failed: $out"
  fi
done
exit 0
