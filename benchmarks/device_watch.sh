# Sourced by the device scripts (benchmarks/device_h200.sh, device_hard.sh). watch_lanes waits for
# the lane processes in PIDS; at LIMIT seconds after T0 it stops them (and every training run under
# runs/dev/). Meanwhile it samples the GPU every 5 s into $OUT/gpu_util.txt. Then it appends the
# elapsed time to $OUT/env.txt and packs runs/dev, without checkpoints, into $OUT/runs.tgz.
watch_lanes() {
  local p live
  while :; do
    live=0; for p in "${PIDS[@]}"; do kill -0 "$p" 2>/dev/null && live=1; done
    [ "$live" = 1 ] || break
    if [ $(( $(date +%s) - T0 )) -ge "$LIMIT" ]; then
      echo "limit ${LIMIT}s reached: stopping lanes"
      kill "${PIDS[@]}" 2>/dev/null; pkill -f "xargs -P"; pkill -f "rollalloc.cli train.*runs/dev/"; break
    fi
    nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader >> "$OUT/gpu_util.txt" 2>/dev/null
    sleep 5
  done
  sleep 2
  echo "elapsed $(( $(date +%s) - T0 )) s" >> "$OUT/env.txt"
  tar czf "$OUT/runs.tgz" --exclude='checkpoints' runs/dev
}
