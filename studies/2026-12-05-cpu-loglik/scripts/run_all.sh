#!/bin/bash
# The study's runs as they were made, from the worktree root, on the shared 2-core AMD EPYC (Zen 4) machine. Each is
# one engine start and one scoring of the 436 loglikelihood requests (suite_mmlu + suite_ceval, limit 1, 0-shot).
# They ran two or three at a time (each the others' competing load, besides five other engineers' jobs: the 1-minute
# load average was 17-25 throughout); every file records `uptime` before and after each scoring.
set -eu
S=studies/2026-12-05-cpu-loglik
PY="env PYTHONPATH=$PWD /work/main/.venv/bin/python $S/scripts/score.py"
R=$S/results
case "${1:-all}" in
  base)      $PY $R/base.json --reps 1 ;;                                  # the demo's engine as it is (2 threads)
  threads1)  OMP_NUM_THREADS=1 $PY $R/threads1.json --reps 1 ;;            # one OpenMP thread
  seqs16)    $PY $R/seqs16.json --reps 1 --arg max_num_seqs=16 ;;          # 16 sequences a step instead of 256
  tokens512) OMP_NUM_THREADS=1 $PY $R/tokens512.json --reps 1 --arg max_num_batched_tokens=512 ;;  # chunked prefill
  loaded)    # two more busy loops on the 2 cores, with one OpenMP thread and with the demo's two. (A first try with two
             # threads, while the others' load was ~20, ran at 28 input tok/s, about 45 minutes, and was stopped, as
             # was a scoring with ONEDNN_MAX_CPU_ISA=AVX512_CORE at 7 s a request; the two-thread run below came later)
             python3 -c 'while 1: pass' & L1=$!
             python3 -c 'while 1: pass' & L2=$!
             OMP_NUM_THREADS=1 $PY $R/loaded-threads1.json --reps 1
             $PY $R/loaded-threads2.json --reps 1
             kill $L1 $L2 ;;
  probe)     # the BF16 matmul alone: bit-identical across threads and load, not across oneDNN's ISA
             P=/work/main/.venv/bin/python
             for i in 1 2; do $P $S/scripts/linear_probe.py; OMP_NUM_THREADS=1 $P $S/scripts/linear_probe.py; done
             ONEDNN_MAX_CPU_ISA=AVX2 $P $S/scripts/linear_probe.py
             ONEDNN_MAX_CPU_ISA=AVX512_CORE $P $S/scripts/linear_probe.py ;;
  all)       for r in base threads1 seqs16 tokens512 loaded probe; do bash "$0" $r; done ;;
esac
# then: python3 $S/scripts/compare.py $R/base.json $R/*.json
