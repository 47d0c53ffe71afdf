"""The one-shot corpus and its leak guard: example Triton programs a method may be shown.

Why here and not in methods/: the guard must compare every example with the task's own
answer (its expert kernel, or an adapted suite's reference code), which a method must never
hold. So retrieval runs on the scheduler's side of the method context (`ctx.example`), and a
method only ever receives the code of an example that passed the guard.

Retrieval is GEAK-v1's: `rank_bm25.BM25Okapi` over tokens split on single spaces
(`text.split(" ")`, as upstream), top 1; a query is matched against the programs'
descriptions (`by="description"`: the instruction, once at the start) or their code
(`by="code"`: the previous code, on a debug round). Ties go to the earlier program in corpus
order, so runs are reproducible.

Leak guard: a program is never shown for a task when it is that task's own program (the
built-in corpus holds every task's expert kernel) or when its similarity to the task's answer
is at or above `threshold` (default 0.8). Similarity reads code: both sources are tokenised
(Python's tokenizer), comments and blank lines dropped, every identifier that is not a
keyword, an attribute name (`tl.load`, `.program_id`) or a module of the kernel language
(tl, triton, torch, math) becomes ID, every number NUM and every string STR; the ratio is
`difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()` over those token lists (1.0:
the same structure). It used to be that ratio on raw text with autojunk on, which ignores
every character occurring in more than 1% of a 200-character text: attention was shown
causal_attention's expert (two logic lines apart) at 0.47. On the built-in corpus the new
measure gives attention / causal_attention 0.98, row_max / row_sum 0.954, index_select /
gather 0.953, row_max / argmax 0.856, cummax / cumprod 0.828, embedding / index_select and
embedding / gather 0.825; every task's nearest other kernel lies between 0.69 and 0.98, so
the threshold 0.8 keeps every named near-template out while leaving each task examples
(scripts/oneshot_similarity.py prints the table). The guard is applied lazily, down the BM25 ranking, so a corpus of
thousands of programs costs a few comparisons per retrieval, each cached per (task, program).
The similarity of every example actually shown is returned, and the scheduler records it.

Corpora: the built-in one is every registered task's expert kernel, described by its task's
instruction. An external corpus (`oneshot_corpus:` in a run's config) is a file in the layout
of GEAK-v1's `train_crawl.json` (TritonBench's ~4k GitHub Triton programs): a JSON list of
objects, or JSON lines, one program per entry, its source under "code" and its description
under "description_1" (GEAK's key), else "description" or "instruction".
"""

from __future__ import annotations

import difflib
import hashlib
import io
import json
import keyword
import threading
import tokenize as pytokenize
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BY = ("description", "code")
DEFAULT_THRESHOLD = 0.8
SIMILARITY_MEASURE = ("difflib.SequenceMatcher(None, a, b, autojunk=False).ratio() over normalised tokens "
                      "(identifiers, numbers and strings abstracted, comments dropped)")
#: Names kept as they are by `structure` (the kernel language's modules), besides keywords and attributes.
KEPT_NAMES = frozenset({"tl", "triton", "torch", "math"})
DESCRIPTION_KEYS = ("description_1", "description", "instruction")


class CorpusError(ValueError):
    """An unreadable or malformed corpus file: one line for the user."""


@dataclass(frozen=True)
class Program:
    """One example program: `name` says where it came from (`task:<id>` for the built-in
    corpus, `<file>:<entry>` for a file)."""

    name: str
    description: str
    code: str


@dataclass(frozen=True)
class Shown:
    """An example that passed the guard: the program and its similarity to the task's answer."""

    program: Program
    similarity: float


def structure(source: str) -> list[str]:
    """A program's token structure (module docstring): identifiers other than keywords,
    attribute names and KEPT_NAMES become ID, numbers NUM, strings STR; comments and blank
    lines are dropped; a source the tokenizer cannot read falls back to its whitespace words."""
    out: list[str] = []
    prev = ""
    try:
        tokens = list(pytokenize.generate_tokens(io.StringIO(source).readline))
    except (pytokenize.TokenError, IndentationError, SyntaxError):
        return source.split()
    for tok in tokens:
        kind, text = tok.type, tok.string
        if kind in (pytokenize.COMMENT, pytokenize.NL, pytokenize.ENCODING, pytokenize.ENDMARKER):
            continue
        if kind == pytokenize.NAME:
            word = text if keyword.iskeyword(text) or prev == "." or text in KEPT_NAMES else "ID"
        elif kind == pytokenize.NUMBER:
            word = "NUM"
        elif kind == pytokenize.STRING:
            word = "STR"
        elif kind == pytokenize.NEWLINE:
            word = "\n"
        elif kind == pytokenize.INDENT:
            word = "INDENT"
        elif kind == pytokenize.DEDENT:
            word = "DEDENT"
        else:
            word = text
        out.append(word)
        prev = text if kind == pytokenize.OP else ""
    return out


def similarity(example: str, answer: str) -> float:
    """Structural similarity of two programs in [0, 1] (module docstring)."""
    return difflib.SequenceMatcher(None, structure(example), structure(answer), autojunk=False).ratio()


def tokenize(text: str) -> list[str]:
    """Tokens split on single spaces, exactly as GEAK-v1's retriever (`text.split(" ")`)."""
    return text.split(" ")


# ---------------------------------------------------------------- corpora


def builtin_programs() -> list[Program]:
    """Every registered task's expert kernel, in task-id order (a task without a readable
    baseline contributes nothing)."""
    from bench.registry import all_tasks

    programs = []
    for task in sorted(all_tasks(), key=lambda t: t.id):
        try:
            code = task.baseline_source()
        except OSError:
            continue
        if code.strip():
            programs.append(Program(f"task:{task.id}", task.instruction, code))
    return programs


def load_corpus_file(path: str | Path) -> list[Program]:
    """Programs from a JSON list or JSON-lines file (module docstring); entries without a
    non-empty string "code" are refused with their position, never skipped silently."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CorpusError(f"cannot read one-shot corpus {path}: {exc.strerror or exc}") from None
    entries = _parse_entries(text, path)
    programs = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or not isinstance(entry.get("code"), str) or not entry["code"].strip():
            raise CorpusError(f"one-shot corpus {path}: entry {i} has no non-empty string \"code\"")
        description = next((entry[k] for k in DESCRIPTION_KEYS if isinstance(entry.get(k), str)), "")
        programs.append(Program(f"{path.name}:{i}", description, entry["code"]))
    if not programs:
        raise CorpusError(f"one-shot corpus {path} holds no programs")
    return programs


def _parse_entries(text: str, path: Path) -> list[Any]:
    stripped = text.strip()
    if stripped.startswith("["):
        try:
            data = json.loads(stripped)
        except json.JSONDecodeError as exc:
            raise CorpusError(f"cannot parse one-shot corpus {path}: {exc}") from None
        return list(data)
    entries = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            entries.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise CorpusError(f"cannot parse one-shot corpus {path} line {n}: {exc.msg}") from None
    return entries


def file_digest(path: str | Path) -> str:
    """The corpus file's sha256, recorded with the run so a resume uses the same corpus."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


# ---------------------------------------------------------------- retrieval


class Corpus:
    """BM25 indexes over the descriptions and over the code of a fixed list of programs."""

    def __init__(self, programs: list[Program]):
        self.programs = list(programs)
        self._index: dict[str, Any] = {}
        self._index_lock = threading.Lock()  # units retrieve from one corpus on many threads

    def _bm25(self, by: str) -> Any:
        """The index for `by`, built on first use: a run that never retrieves (no one-shot
        context) neither pays for it nor needs rank_bm25 installed."""
        with self._index_lock:
            if by not in self._index:
                from rank_bm25 import BM25Okapi

                texts = [p.description if by == "description" else p.code for p in self.programs]
                self._index[by] = BM25Okapi([tokenize(t) for t in texts])
            return self._index[by]

    def __len__(self) -> int:
        return len(self.programs)

    def ranking(self, query: str, by: str) -> list[int]:
        """Program indices from the best BM25 score down; ties in corpus order."""
        if by not in BY:
            raise ValueError(f"retrieval by {by!r}: choose description or code")
        if not self.programs:
            return []
        scores = self._bm25(by).get_scores(tokenize(query))
        return sorted(range(len(self.programs)), key=lambda i: (-scores[i], i))


class GuardedRetriever:
    """Retrieval for one task: the best program that is not the task's own and is less than
    `threshold` similar to every one of the task's answers (its expert kernel, its reference
    code). Thread-safe: units of one task share it, and its similarity cache."""

    def __init__(self, corpus: Corpus, task_id: str, answers: tuple[str, ...], threshold: float = DEFAULT_THRESHOLD):
        if not 0.0 < threshold <= 1.0:
            raise ValueError(f"the one-shot similarity threshold must be in (0, 1], got {threshold}")
        self.corpus = corpus
        self.task_id = task_id
        self.answers = tuple(a for a in answers if a.strip())
        self.threshold = threshold
        self._similarity: dict[int, float] = {}
        self._lock = threading.Lock()

    def similarity_of(self, index: int) -> float:
        """The program's highest similarity to any of the task's answers (cached)."""
        with self._lock:
            cached = self._similarity.get(index)
        if cached is None:
            code = self.corpus.programs[index].code
            cached = max((similarity(code, a) for a in self.answers), default=0.0)
            with self._lock:
                self._similarity[index] = cached
        return cached

    def allowed(self, index: int) -> bool:
        if self.corpus.programs[index].name == f"task:{self.task_id}":
            return False
        return self.similarity_of(index) < self.threshold

    def best(self, query: str, by: str) -> Shown | None:
        for i in self.corpus.ranking(query, by):
            if self.allowed(i):
                return Shown(self.corpus.programs[i], self.similarity_of(i))
        return None


def task_answers(task: Any) -> tuple[str, ...]:
    """What a task's examples must not resemble: its expert kernel (an adapted suite's
    reference code) and, where it has one, the source of its reference function."""
    import inspect

    answers = []
    try:
        answers.append(task.baseline_source())
    except OSError:
        pass
    try:
        answers.append(inspect.getsource(task.reference))
    except (OSError, TypeError):
        pass
    return tuple(answers)


class OneShotLibrary:
    """One corpus for a whole run, and a guarded retriever per task (made on first use)."""

    def __init__(self, programs: list[Program], threshold: float = DEFAULT_THRESHOLD, source: str = "builtin"):
        if not 0.0 < threshold <= 1.0:
            raise ValueError(f"the one-shot similarity threshold must be in (0, 1], got {threshold}")
        self.corpus = Corpus(programs)
        self.threshold = threshold
        self.source = source
        self._retrievers: dict[str, GuardedRetriever] = {}
        self._lock = threading.Lock()

    def for_task(self, task: Any) -> GuardedRetriever:
        with self._lock:
            retriever = self._retrievers.get(task.id)
            if retriever is None:
                retriever = GuardedRetriever(self.corpus, task.id, task_answers(task), self.threshold)
                self._retrievers[task.id] = retriever
            return retriever


def open_library(corpus_path: str | Path | None = None, threshold: float = DEFAULT_THRESHOLD) -> OneShotLibrary:
    """The built-in corpus, or the programs of `corpus_path`."""
    if corpus_path is None:
        return OneShotLibrary(builtin_programs(), threshold, "builtin")
    return OneShotLibrary(load_corpus_file(corpus_path), threshold, str(corpus_path))
