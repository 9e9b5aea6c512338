#!/usr/bin/env bash
# The study's chain (started by start.sh as /tmp/h200-chain-loop.sh, the name tools/h200/h200-wait.sh watches for),
# run from /tmp/suite-chain-src. STEPS picks the parts: a (offline pair, then served pair; a-seq: the four one by one), b (checkpoint by path),
# c (the suite on the 8B shape), plain (plain vllm serve + vllm bench serve on the same points), d (BF16 under the
# mode with TRITON_ATTN against FLASH_ATTN, recipes/d-bf16-triton-bi.yaml). Each `suite run` goes
# through tools/h200/h200-run.sh (its own copy of the tree, setsid, /tmp/suite-run-NAME.log), out /tmp/runs-NAME.
# Resume on a fresh machine: carry the archive pieces a wait brought back (runs-NAME.tar.gz.part-*) to /tmp/resume
# before start.sh; each run then continues with `suite run --resume` (missing stages only).
# After each run: `suite gate RUN --no-record` into /tmp/extra-out/gate-NAME.txt (its exit code on the last line).
set -uo pipefail
R=studies/2026-12-05-verdicts/recipes
log() { echo "$(date +%T) chain: $*" >> /tmp/h200-chain.log; }
[ -d /tmp/resume ] && [ ! -d /tmp/resume-all ] && mv /tmp/resume /tmp/resume-all
start_run() {  # RECIPE-NAME: start it (continuing its archive when one was carried); returns at once
  local name=$1 tag=runs-$1
  rm -rf /tmp/resume
  if ls /tmp/resume-all/"$tag".tar.gz.part-* >/dev/null 2>&1; then
    mkdir -p /tmp/resume && cp /tmp/resume-all/"$tag".tar.gz.part-* /tmp/resume/
  fi
  bash tools/h200/h200-run.sh "$R/$name.yaml" "/tmp/$tag" >> /tmp/h200-chain.log 2>&1 || { log "$name: not started (rc $?)"; rm -rf /tmp/resume; return 1; }
  rm -rf /tmp/resume; log "$name: started"
}
wait_runs() { sleep 3; while pgrep -f "[p]ython3 -m suite run" >/dev/null; do sleep 5; done; }
gate() {
  local name=$1 run; run=$(ls -d /tmp/runs-"$name"/2*/ 2>/dev/null | tail -1)
  [ -n "$run" ] || return 0
  (PYTHONPATH=$PWD:/tmp/envs/serve timeout 120 python3 -m suite gate "$run" --no-record; echo "exit $?") \
    > /tmp/extra-out/gate-"$name".txt 2>&1
  log "$name: gate $(tail -1 /tmp/extra-out/gate-"$name".txt)"
}
ckpt() {  # a-offline's FP8-dynamic checkpoint, as the folder b-checkpoint-path.yaml names
  local c; c=$(ls -d /tmp/runs-a-offline/checkpoints/fp8_dynamic-*/ /tmp/runs-b0-quantize/checkpoints/fp8_dynamic-*/ 2>/dev/null | head -1)
  if [ -z "$c" ]; then  # a fresh machine after a resumed (a): build it again (same content key)
    log "b: no checkpoint; building it with b0-quantize"; start_run b0-quantize && wait_runs
    c=$(ls -d /tmp/runs-b0-quantize/checkpoints/fp8_dynamic-*/ 2>/dev/null | head -1)
  fi
  [ -n "$c" ] || { log "b: no FP8 checkpoint"; return 1; }
  rm -rf models/qwen2.5-coder-0.5b-fp8-dynamic && cp -r "$c" models/qwen2.5-coder-0.5b-fp8-dynamic
  log "b: checkpoint $c -> models/qwen2.5-coder-0.5b-fp8-dynamic ($(du -sh models/qwen2.5-coder-0.5b-fp8-dynamic | cut -f1))"
}
for step in ${STEPS:-a b c plain}; do
  case $step in
    a)  log "a: offline, batch-invariant off and on, side by side"
        start_run a-offline; start_run a-offline-bi; wait_runs; gate a-offline; gate a-offline-bi
        log "a: served, batch-invariant off and on, side by side"
        start_run a-served; start_run a-served-bi; wait_runs; gate a-served; gate a-served-bi ;;
    a-seq)  # the fallback when the side-by-side pairs do not fit the GPU: one run at a time
        for n in a-offline a-offline-bi a-served a-served-bi; do start_run $n && wait_runs; gate $n; done ;;
    b)  # the code as the latest device call laid it (variants[].model may have landed since this chain started)
        root=$(cat /tmp/repo-root 2>/dev/null); if [ -n "$root" ] && [ -d "$root/suite" ]; then
          rm -rf suite && cp -r "$root/suite" suite && cp -r "$root/$R/." "$R/" && log "b: code refreshed from $root"; fi
        ckpt && { start_run b-checkpoint-path && wait_runs; gate b-checkpoint-path; } ;;
    c)  log "c: suite, 8B shape"; start_run c-llama3-8b-shape && wait_runs; gate c-llama3-8b-shape ;;
    d)  log "d: BF16 under the mode, TRITON_ATTN vs FLASH_ATTN at 64 and 1,024 (batch-invariance.md)"
        start_run d-bf16-triton-bi && wait_runs ;;
    plain) log "plain: vllm serve + vllm bench serve"
        bash studies/2026-12-05-verdicts/device/plain-vllm.sh >> /tmp/h200-chain.log 2>&1; log "plain: rc $?" ;;
  esac
done
log "done"
