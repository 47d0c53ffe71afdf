#!/usr/bin/env bash
# The GPU verification battery, in parts that each fit one 10-minute device command.
#
# Why a script: device time is scarce and a machine is bare on every start, so the steps that
# belong together (install the wheels the image lacks, smoke-test the candidate sandbox on the
# GPU, then the tests and benchmarks that need it) run from one command line, each step capped
# by `timeout`, every log kept under $OUT (default /tmp/kmc-gpu-out) and a one-line status per
# step printed last.
#
#   bash benchmarks/gpu_verify.sh boundary   # sandbox smoke, device-trace probe, sandbox + hostile + judge GPU tests, sandbox cost
#   bash benchmarks/gpu_verify.sh runs       # bench check of every expert, the shipped small run re-recorded, the 7-task command
#   bash benchmarks/gpu_verify.sh speed      # issue 42: the compile pass, timing holds and the judge's memory on the GPU, the 7-task command
#                                              (SEVEN_WORKERS="N M", SEVEN_UNGATED=N, SEVEN_ARGS: see the part)
#   bash benchmarks/gpu_verify.sh profile    # own-test jobs' phases, then both sides of the boundary under cProfile
#   bash benchmarks/gpu_verify.sh strength DATA_DIR [MINUTES]   # bench strength on GEAK-eval's TritonBench-revised files
#   bash benchmarks/gpu_verify.sh geak DATA_DIR [SECONDS] [PROGRESS]   # bench check of GEAK-eval's TritonBench-revised
#                                              references (issue 42 item 7): one run capped at SECONDS (default 560),
#                                              each row with its job's phases, the host's CPU and the GPU's use every
#                                              5 s beside it; PROGRESS: a carried --jsonl to go on from
#
# Wheels for packages the image lacks (openai and its needs, tenacity, rank-bm25, pyseccomp) are
# installed from .whl/ when it exists (see the device tool's README).
set -u
OUT=${OUT:-/tmp/kmc-gpu-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} || { echo "wheel install failed"; exit 1; }
fi
STATUS=()
step() {  # step NAME SECONDS COMMAND...: run it capped, log to $OUT/NAME.log, remember its status
  local name=$1 secs=$2; shift 2
  local t0=$SECONDS
  timeout --kill-after=10 "$secs" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  STATUS+=("$name rc=$rc $((SECONDS - t0))s: $(tail -n 1 "$OUT/$name.log" | cut -c1-200)")
  return $rc
}
report() { printf '%s\n' "${STATUS[@]}"; }
trap report EXIT

part=${1:-boundary}
case $part in
boundary)
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv >"$OUT/env.log" 2>&1
  python3 -c 'import torch, triton; print(torch.__version__, triton.__version__, torch.cuda.get_device_name(0))' >>"$OUT/env.log" 2>&1
  python3 -c 'from bench.registry import get_task; open("/tmp/va.py","w").write(get_task("vector_add").baseline_source())'
  if ! step smoke 180 python3 cli.py eval --task vector_add --candidate /tmp/va.py --hidden --json; then
    step diagnose 120 python3 -m pytest -q -x -p no:cacheprovider tests/test_sandbox.py -k gpu
    exit 1
  fi
  step trace_probe 90 python3 scripts/gpu_trace_probe.py --json "$OUT/trace-probe.json"
  # the whole hostile corpus on the GPU (not only its gpu-marked files), the sandbox's own tests
  step tests 420 python3 -m pytest -q -p no:cacheprovider tests/test_kernel_trace.py tests/test_sandbox.py \
    tests/test_sandbox_hostile.py tests/test_sandbox_refusal.py tests/test_hostile.py tests/test_judge_gpu.py
  step sandbox_cost 150 python3 benchmarks/bench_sandbox.py --json "$OUT/sandbox-cost.json"
  ;;
runs)
  step check 200 python3 cli.py bench check --suite full --no-timing --jsonl "$OUT/check.jsonl"
  rm -rf /tmp/kmc-runs
  step small_run 200 python3 cli.py compare --budget 6 --tasks vector_add,softmax,layer_norm --repeats 2 --seed 0 \
    --out /tmp/kmc-runs \
    && step ship 60 python3 scripts/ship_run.py "$(ls -d /tmp/kmc-runs/*/ | head -n 1)" /tmp/gpu_run_small \
    && tar -C /tmp -czf "$OUT/gpu_run_small.tgz" gpu_run_small  # one file: at most 8 come back from a device call
  step seven 200 python3 benchmarks/bench_compare_gpu.py --skip-full --json "$OUT/seven.json"
  ;;
profile)
  # where a method's own-test job and a judged call spend their seconds (scripts/judge_profile.py):
  # own-test jobs as a compare run makes them (PROFILE_ALT_ENV: once more with those variables
  # set), then with PROFILE_CPROFILE=1 under cProfile on both sides of the boundary
  tasks=${PROFILE_TASKS:-vector_add,softmax,layer_norm,rms_norm,matmul,cumsum,flip}
  step own_tests 240 python3 scripts/judge_profile.py --own-tests --repeats "${PROFILE_REPEATS:-3}" --tasks "$tasks" \
    --json "$OUT/own-tests.json"
  if [ -n "${PROFILE_ALT_ENV:-}" ]; then
    step own_tests_alt 240 env $PROFILE_ALT_ENV python3 scripts/judge_profile.py --own-tests \
      --repeats "${PROFILE_REPEATS:-3}" --tasks "$tasks" --json "$OUT/own-tests-alt.json"
  fi
  if [ "${PROFILE_CPROFILE:-0}" = 1 ]; then
    step own_tests_profile 150 python3 scripts/judge_profile.py --own-tests --candidate-profile --tasks softmax,matmul \
      --repeats 2
    step judge_cprofile 150 python3 scripts/judge_profile.py --cprofile --tasks softmax,rms_norm --repeats 3
  fi
  ;;
speed)
  # Issue 42: the compile pass and the split timing hold on the GPU, then the 7-task command
  # with the defaults; SEVEN_UNGATED=N: with N workers and contexts made without a ticket;
  # FULL_LIMIT_S: the full suite at budget 100 cut there (FULL_ARGS: its flags); then, for each N
  # in SEVEN_WORKERS, the 7-task command with N workers; SEVEN_ALT_ENV: once more with those
  # variables set, once per ';'-separated group (the judge's switches). SEVEN_ARGS: more flags.
  # SPEED_TESTS=0 skips the GPU tests and the per-call spans, SEVEN=0 the default 7-task run;
  # CHECK=1 adds `bench check` of every expert, SPANS_BATCHES="1" the batched spans only ("" none),
  # SPANS_SMALL=0 not the small cases' spans,
  # MEMORY=0 leaves the memory probe out, GPU_TESTS=0 the GPU tests.
  if [ "${SPEED_TESTS:-1}" != 0 ]; then  # SPEED_TESTS=0: straight to the runs (a second call)
    [ "${GPU_TESTS:-1}" = 0 ] || step gpu_tests 150 python3 -m pytest -q -p no:cacheprovider -m "gpu or not slow" tests/test_precompile.py \
      tests/test_timing_protocols.py tests/test_calls_ahead.py tests/test_wire.py tests/test_fused_compare.py \
      tests/test_hidden_warmup.py tests/test_device_memory.py
    # a judge worker's own GPU memory after big tasks' jobs (judge/device_memory.py hands idle blocks back),
    # and what was live at each job's peak, by the line that allocated it
    if [ "${MEMORY:-1}" != 0 ]; then  # MEMORY=0: not the probe
      step memory 180 python3 scripts/judge_memory_probe.py \
        "${MEMORY_TASKS:-swiglu,axpby,gather,cross_entropy,embedding,transpose,add_relu,total_sum}" --history --live-inputs \
        --json "$OUT/memory.json"
    fi
    if [ "${MEMORY_EXPANDABLE:-0}" = 1 ]; then  # the same under torch's expandable segments (less fragmentation?)
      step memory_expandable 180 env PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python3 \
        scripts/judge_memory_probe.py "${MEMORY_TASKS:-swiglu,axpby,gather,cross_entropy,embedding,transpose,add_relu,total_sum}" \
        --json "$OUT/memory-expandable.json"
    fi
    if [ "${CHECK:-0}" = 1 ]; then  # every expert judged on its hidden cases: no verdict moved
      step check 200 python3 cli.py bench check --suite full --no-timing --jsonl "$OUT/check.jsonl"
    fi
    # the judged call's milliseconds, batched (judge/oracle.py batches) and one call per request
    for batch in ${SPANS_BATCHES-0 1}; do
      step "spans_batch$batch" 120 env KMC_CALL_BATCH=$batch python3 scripts/judge_profile.py --spans \
        --tasks vector_add,flip,softmax,rms_norm,cumsum --repeats 3 --case-set hidden
    done
    # the goal's small case (at most 65,536 elements), batched: SPANS_SMALL=0 leaves it out
    [ "${SPANS_SMALL:-1}" = 0 ] || step spans_small 120 python3 scripts/judge_profile.py --spans --small-cases \
      --tasks vector_add,flip,softmax,rms_norm,cumsum --repeats 3 --case-set hidden --json "$OUT/spans-small.json"
  fi
  if [ "${SEVEN:-1}" != 0 ]; then  # SEVEN=0: only the variants below
    # SEVEN_RUNS=3: a same-seed trio (determinism); SEVEN_CAP: its seconds
    step seven "${SEVEN_CAP:-260}" python3 benchmarks/bench_compare_gpu.py --skip-full --steps \
      --determinism "${SEVEN_RUNS:-1}" ${SEVEN_ARGS:-} --json "$OUT/seven.json"
  fi
  if [ -n "${SEVEN_UNGATED:-}" ]; then
    step seven_ungated 260 python3 benchmarks/bench_compare_gpu.py --skip-full --steps --ungated-contexts \
      --workers "$SEVEN_UNGATED" ${SEVEN_ARGS:-} --json "$OUT/seven-ungated.json"
  fi
  if [ -n "${FULL_LIMIT_S:-}" ]; then
    step full $((FULL_LIMIT_S + 120)) python3 benchmarks/bench_compare_gpu.py --skip-seven --steps \
      --full-limit-s "$FULL_LIMIT_S" ${FULL_ARGS:-} --json "$OUT/full.json"
  fi
  # SEVEN_ALT_ENV: one run per ';'-separated group, e.g. "KMC_CALL_BATCH=0 KMC_PRECOMPILE=0;KMC_SPARES=2"
  IFS=';' read -r -a alts <<<"${SEVEN_ALT_ENV:-}"
  for i in "${!alts[@]}"; do
    [ -n "${alts[$i]// /}" ] || continue
    step "seven_alt$i" 260 env ${alts[$i]} python3 benchmarks/bench_compare_gpu.py --skip-full --steps ${SEVEN_ARGS:-} \
      --json "$OUT/seven-alt$i.json"
  done
  for n in ${SEVEN_WORKERS:-}; do
    step "seven_w$n" 260 python3 benchmarks/bench_compare_gpu.py --skip-full --steps --workers "$n" ${SEVEN_ARGS:-} \
      --json "$OUT/seven-w$n.json"
  done
  ;;
strength)
  # chunks of tasks until --minutes, every finished chunk kept; then one tarball
  step strength 560 python3 scripts/strength_suite.py --source "geak-eval:$2" --suite tritonbench --device auto \
    --mutants 3 --minutes "${3:-8}" --out /tmp/strength
  tar -C /tmp -czf "$OUT/strength.tgz" strength
  ;;
geak)
  # the whole suite in one run when it fits (item 7: 10 minutes on an H200); a cut run keeps its rows,
  # and PROGRESS (a --jsonl carried from an earlier call) is continued with --skip-judged
  # each job's named steps (judge/phases.py KMC_JOB_STEPS: the judge's side, the compile pass, the gate) as one file
  # GEAK_TASKS: only those tasks; GEAK_TAG: a suffix for this run's files (two runs in one call)
  # KMC_CHECK_RETIRE=0: no worker retired after a job out of GPU memory (runners/check.py: an A/B switch)
  # KMC_PROBE_AHEAD=0: a worker waits idle for its probing children (bench/adapters/shape_probe.py: an A/B switch)
  [ -n "${4:-}" ] && cp "$4" "$OUT/geak-check${GEAK_TAG:-}.jsonl"
  rm -rf /tmp/geak-steps && mkdir -p /tmp/geak-steps
  # whether the check is CPU- or GPU-bound: the host's CPU and the GPU's busy shares every 5 s
  vmstat -n 5 >"$OUT/geak-vmstat${GEAK_TAG:-}.log" 2>&1 & vmstat_pid=$!
  nvidia-smi dmon -s um -d 5 >"$OUT/geak-dmon${GEAK_TAG:-}.log" 2>&1 & dmon_pid=$!
  KMC_JOB_STEPS=/tmp/geak-steps step "geak${GEAK_TAG:-}" "${3:-560}" python3 cli.py bench check \
    --source "geak-eval:$2" --suite tritonbench --no-timing --workers "${GEAK_WORKERS:-12}" --timeout 150 \
    --jsonl "$OUT/geak-check${GEAK_TAG:-}.jsonl" --log-file "$OUT/geak-run${GEAK_TAG:-}.log" ${4:+--skip-judged} ${GEAK_TASKS:+--tasks "$GEAK_TASKS"}
  kill "$vmstat_pid" "$dmon_pid" 2>/dev/null
  cat /tmp/geak-steps/*.jsonl >"$OUT/geak-steps${GEAK_TAG:-}.jsonl" 2>/dev/null
  grep -v ': correct (' "$OUT/geak${GEAK_TAG:-}.log" | grep '^  tb-' | cut -c1-240
  wc -l <"$OUT/geak-check${GEAK_TAG:-}.jsonl"
  ;;
*)
  echo "unknown part: $part (boundary, runs, speed, profile, strength or geak)"; exit 2 ;;
esac
