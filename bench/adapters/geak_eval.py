"""GEAK-eval layout: TritonBench-revised (`TritonBench_G_v1/*.py`) and the ROCm benchmark
(`ROCm_v1/*.py`), from a GEAK-eval checkout, the data folder of its wheel, or thunlp's
TritonBench repository. A folder pointed at directly may also be a variant of those
(`ROCm_v1_autotune/`, `ROCm_v1.1/`).

Each file is reference code, a line of 146 '#', then the suite's test section; geak_parse.py
finds the entry point (a wrapper, an autograd Function, or a kernel the test launches itself),
geak_calls.py records the suite's calls and geak_record.py builds the cases from them. Instruction
records come from a JSON beside the folders when one is present (GEAK-eval's
`TritonBench_G_comp_alpac_v1_fixed_with_difficulty.json` and
`ROCm_eval_complex_instruct_v1.json`, or TritonBench's own `TritonBench_G_v1.json`, whose
text is under `comp_instru` and whose difficulty is a string); otherwise the task is
code-to-code (rewrite the reference) and marked so. TritonBench's perf scripts
(`performance_metrics/perf_G/golden_metrics/<op>_perf.py`) give the perf inputs when present.

Skipped, each with its reason: files with AMD-only constructs (`tl.extra.hip`,
`waves_per_eu`, HIP-only config keys, fnuz fp8 dtypes) anywhere but on AMD; files not in the
layout; files whose test reaches no kernel of the reference code.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from bench.adapters._adapted import ADAPTED_TOLERANCES, AdaptedTask, interpreter_autotune_first_config
from bench.adapters.base import AdapterError, AdapterReport, Skipped
from bench.adapters.geak_parse import SuiteFile, parse_file
from bench.adapters.geak_record import PERF_SLOTS, SHAPE_SLOTS_CPU, SHAPE_SLOTS_GPU, GeakSuite
from bench.adapters.registry import register_adapter
from bench.task import case

LAYOUTS = {"TritonBench_G_v1": "tritonbench", "ROCm_v1": "rocm"}
AMD_ONLY = (
    (re.compile(r"(?:\btl|triton\.language)\.extra\.hip"), "tl.extra.hip (HIP libdevice)"),
    (re.compile(r"\bwaves_per_eu\b"), "waves_per_eu (HIP-only config key)"),
    (re.compile(r"\bmatrix_instr_nonkdim\b"), "matrix_instr_nonkdim (HIP-only config key)"),
    (re.compile(r"""['"]kpack['"]|\bkpack\s*="""), "kpack (HIP-only config key)"),
    (re.compile(r"float8_e4m3fnuz|float8_e5m2fnuz"), "fnuz fp8 dtypes (AMD only)"),
)
SEEDS = range(1, 6)
TRITON_PIN = "3.3"
"""The Triton version GEAK-eval 0.1.5 pins (its requirements); another version may compile the
suite's kernels differently, so loading says so."""


def amd_only_constructs(text: str) -> list[str]:
    return [label for pattern, label in AMD_ONLY if pattern.search(text)]


_DIFFICULTY_WORDS = {"easy": 1, "simple": 1, "medium": 3, "moderate": 3, "hard": 5, "difficult": 5}


def difficulty_of(record: dict[str, Any] | None) -> int:
    """A record's difficulty as 1-5: GEAK-eval writes an int, thunlp a numeric string ("3"),
    some files a word; anything else is the middle, 3."""
    value: Any = record.get("difficulty") if record else None
    if isinstance(value, str):
        text = value.strip().lower()
        try:
            value = float(_DIFFICULTY_WORDS.get(text, text))
        except ValueError:
            return 3
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 1 <= value <= 5:
        return int(round(value))
    return 3


# Instruction records: GEAK-eval's own JSONs ({"file", "instruction", "difficulty", ...}) and
# TritonBench's statistics file TritonBench_G_v1.json ({"file", "comp_instru", "simp_instru",
# ...}). TritonBench's alpaca JSONs ({"instruction", "input", "output"}) name no file and
# cannot be matched to one.
_INSTRUCTION_KEYS = ("instruction", "comp_instru")


def instruction_records(folder: Path) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Records keyed by file name, from JSON lists of {"file", "instruction" or "comp_instru",
    ...} found in the folder, its parent or grandparent. The first record per file wins
    (files sorted); each record comes back with its text under "instruction"."""
    records: dict[str, dict[str, Any]] = {}
    used: list[str] = []
    seen: set[Path] = set()
    for where in (folder, folder.parent, folder.parent.parent):
        for js in sorted(where.glob("*.json")):
            if js in seen:
                continue
            seen.add(js)
            try:
                data = json.loads(js.read_text())
            except (OSError, ValueError):
                continue
            if not isinstance(data, list):
                continue
            found = 0
            for rec in data:
                if not (isinstance(rec, dict) and isinstance(rec.get("file"), str)):
                    continue
                text = next((rec[k] for k in _INSTRUCTION_KEYS if isinstance(rec.get(k), str) and rec[k].strip()), None)
                if text is not None:
                    records.setdefault(Path(rec["file"]).name, {**rec, "instruction": text})
                    found += 1
            if found:
                used.append(str(js))
    return records, used


# ---------------------------------------------------------------- tasks


def _instruction(sf: SuiteFile, record: dict[str, Any] | None) -> tuple[str, str]:
    how = _how_called(sf)
    if record is not None:
        return record["instruction"] + how, "instruction"
    text = (f"Rewrite the following Triton program as a correct and faster Triton implementation, keeping its "
            f"interface. The judge calls it on the suite's own inputs, on permutations of their values and on new "
            f"shapes, and compares with this reference (return values and the tensors it writes into). Allocate on "
            f"the inputs' device.\n```python\n{sf.code}\n```" + how)
    return text, "code-to-code"


def _how_called(sf: SuiteFile) -> str:
    """The part of the instruction that says what the judge calls: the suite's launcher from
    its test section and the glue, which the judge appends when a file does not define them."""
    if not sf.appended:
        return ""
    if sf.entry_kind == "launch":
        lead = (f"\n\nThe suite's test launches the kernel `{sf.target}` itself, so your file must define "
                f"`{sf.target}` as a Triton kernel with the same parameters. The judge calls `{sf.entry}` below with "
                f"the grid and arguments the test used, and compares the tensors the kernel writes; it is appended to "
                f"your file unless you define it:")
    else:
        lead = (f"\n\nThe judge calls `{sf.entry}`, which the suite defines as below (it reaches your `{sf.target}`); "
                f"it is appended to your file unless you define it:")
    return f"{lead}\n```python\n{sf.appended}\n```"


def perf_script_for(folder: Path, stem: str) -> Path | None:
    """TritonBench's perf script for `<stem>.py`: performance_metrics/perf_G/golden_metrics/ beside
    the data folder (GEAK-eval's wheel and thunlp's repository keep it at the same place)."""
    for root in (folder.parent.parent, folder.parent):
        path = root / "performance_metrics" / "perf_G" / "golden_metrics" / f"{stem}_perf.py"
        if path.is_file():
            return path
    return None


def _make_task(sf: SuiteFile, record: dict[str, Any] | None, interpreter: bool, perf_script: Path | None,
               id_prefix: str) -> AdaptedTask:
    suite = GeakSuite(sf, interpreter, perf_script)
    instruction, mode = _instruction(sf, record)
    calls = range(sf.n_calls)
    visible = tuple(case(f"visible-call{i}", "recorded", 0, call=i) for i in range(min(sf.n_calls, 2)))
    replays = tuple(case(f"hidden-call{i}-suite", "recorded", 0, call=i) for i in calls if i >= 2)
    permuted = tuple(case(f"hidden-call{i}-perm-s{s}", "recorded", s, call=i) for i in calls for s in SEEDS)
    shapes_gpu = tuple(case(f"hidden-shape{j}", "recorded", 0, shape=j) for j in range(SHAPE_SLOTS_GPU))
    shapes_cpu = shapes_gpu[:SHAPE_SLOTS_CPU]
    if sf.entry_kind == "launch":
        shapes_gpu = shapes_cpu = ()  # a launch's grid is the test's own: replayed at the shapes it was written for
    perf_from = ("the suite's perf script" if perf_script is not None else
                 "the suite's performance test" if sf.perf_callers else "the largest new shapes")
    return AdaptedTask(
        id=f"{id_prefix}-{sf.path.stem}",
        instruction=instruction,
        entry_point=sf.entry,
        signature=sf.signature,
        reference=suite.reference,
        make_inputs=suite.make_inputs,
        dtypes=("recorded",),
        visible=visible,
        hidden_gpu=replays + permuted + shapes_gpu,
        hidden_cpu=replays + permuted + shapes_cpu,
        perf=tuple(case(f"perf-{j}", "recorded", 0, perf=j) for j in range(PERF_SLOTS)),
        baseline_file="",
        difficulty=difficulty_of(record),
        bytes_moved=lambda c: 0,
        flops=lambda c: 0,
        suites=("geak-eval", "tritonbench" if sf.kind == "tritonbench" else "rocm"),
        tolerances=dict(ADAPTED_TOLERANCES),
        category="adapted",
        source=f"geak-eval:{sf.kind}",
        output_args=suite.output_args,
        seeded_rng=sf.draws_random,
        triton_reference=True,
        origin=str(sf.path),
        mode=mode,
        test_mode=(f"differential against the suite's reference: its recorded calls replayed, 5 seeded permutations "
                   f"of their floating-point inputs, new shapes where the reference runs; perf inputs from {perf_from}"),
        baseline_text=suite.baseline,
        appended=suite.appended,
        test_imports=suite.test_imports,
        output_form=suite.judged,
        entry_kind=sf.entry_kind,
        suite_cases=visible + replays,
        ahead=suite.start_ahead,
    )


# GEAK-eval ships variants of the ROCm set beside ROCm_v1/ (ROCm_v1_autotune/, ROCm_v1.1/):
# searched from above, only the canonical folder is taken; pointed at, a variant is read too.
_LAYOUT_VARIANTS = (("ROCm_v1", "rocm"), ("TritonBench_G_v1", "tritonbench"))


def find_layout_folders(root: Path) -> list[tuple[Path, str]]:
    if root.name in LAYOUTS and root.is_dir():
        return [(root, LAYOUTS[root.name])]
    for prefix, kind in _LAYOUT_VARIANTS:
        if root.is_dir() and re.fullmatch(re.escape(prefix) + r"[._][\w.]+", root.name):
            return [(root, kind)]
    found = []
    for name, kind in LAYOUTS.items():
        matches = sorted((p for p in root.rglob(name) if p.is_dir()), key=lambda p: (len(p.parts), str(p)))
        if matches:
            found.append((matches[0], kind))
    return found


@register_adapter("geak-eval")
class GeakEvalAdapter:
    """`geak-eval:PATH`: the layout folders found under PATH (or PATH itself), one task per suite file."""

    def load(self, root: Path, vendor: str) -> AdapterReport:
        folders = find_layout_folders(root)
        if not folders:
            raise AdapterError(f"{root} holds no TritonBench_G_v1/ or ROCm_v1/ folder (the GEAK-eval layout)")
        report = AdapterReport("geak-eval", str(root), vendor)
        if vendor == "cpu":
            interpreter_autotune_first_config()
        note = triton_version_note()
        if note:
            report.notes.append(note)
        block_pointer_files: list[str] = []
        for folder, kind in folders:
            records, used = instruction_records(folder)
            report.notes.append(f"{kind}: {folder}" + (f"; instructions from {', '.join(used)}" if used
                                                         else "; no instruction JSON: tasks are code-to-code"))
            prefix = "tb" if kind == "tritonbench" else "rocm"
            for path in sorted(folder.glob("*.py")):
                if path.name == "__init__.py":
                    continue  # the package marker of the data folder, not a task
                text = path.read_text(errors="replace")
                amd = amd_only_constructs(text)
                if amd and vendor != "amd":
                    report.skipped.append(Skipped(str(path), f"AMD-only construct(s): {', '.join(amd)}; runs on ROCm only "
                                                             f"(this machine: {vendor})"))
                    continue
                parsed = parse_file(path, kind)
                if isinstance(parsed, str):
                    report.skipped.append(Skipped(str(path), parsed))
                    continue
                if _BLOCK_POINTERS.search(parsed.code):
                    block_pointer_files.append(path.name)
                perf = perf_script_for(folder, path.stem) if kind == "tritonbench" else None
                report.tasks.append(_make_task(parsed, records.get(path.name), vendor == "cpu", perf, prefix))
        if block_pointer_files and not block_pointers_supported():
            report.notes.append(f"warning: {len(block_pointer_files)} adapted files use block pointers (tl.make_block_ptr), "
                                f"which the Triton installed here removed: their references fail here and run with the "
                                f"Triton GEAK-eval pins ({', '.join(block_pointer_files)})")
        return report


_BLOCK_POINTERS = re.compile(r"\btl\.(make_block_ptr|advance)\b")


def block_pointers_supported() -> bool:
    """Whether this Triton still has block pointers (removed in favour of tensor descriptors)."""
    try:
        import triton.language as tl
    except ImportError:
        return True
    return "have been removed" not in (getattr(tl, "make_block_ptr", None).__doc__ or "")


def triton_version_note() -> str:
    """A warning when the installed Triton is not the version GEAK-eval pins."""
    try:
        from importlib.metadata import version

        installed = version("triton")
    except Exception:  # noqa: BLE001 - no metadata: nothing to compare
        return ""
    if installed.split(".")[:2] == TRITON_PIN.split("."):
        return ""
    return (f"warning: Triton {installed} is installed; GEAK-eval pins Triton {TRITON_PIN}, so the suite's kernels "
            f"may compile or behave differently here than where its results were published")
