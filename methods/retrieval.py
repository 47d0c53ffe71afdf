"""GEAK's one-shot retrieval: BM25 over a corpus of Triton programs, top 1.

As in GEAK-v1: `rank_bm25.BM25Okapi` over whitespace tokens; the task's instruction is
matched against the corpus *descriptions* (once, at the start), and the previous code against
the corpus *code* (on every debug round). The best-scoring program is returned even when the
score is low (GEAK always shows its top hit); ties go to the first program in corpus order,
which is sorted by task id so runs are reproducible.

Where the corpus comes from (the design choice): the expert baselines of the *other*
registered tasks, each described by its task's instruction. It is built here, from the task
registry, rather than handed in by the scheduler through the context, because retrieval
needs no GPU, store or model, works unchanged in every context (the scheduler's, the dry
run's, a test's), and the exclusion is one small function a test can check exhaustively.
Leak guard: the corpus for a task never holds (a) any program of a task with the same id,
nor (b) any program whose source equals the task's own expert baseline (compared after
normalising line endings and trailing whitespace), so two tasks that share a kernel file
cannot leak it to each other either. The task's own baseline is read only to exclude it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

BY = ("description", "code")


@dataclass(frozen=True)
class Program:
    task_id: str
    description: str
    code: str


def tokenize(text: str) -> list[str]:
    """Whitespace tokens, as GEAK-v1 does (no lower-casing, no punctuation splitting)."""
    return text.split()


def normalise(source: str) -> str:
    return "\n".join(line.rstrip() for line in source.strip().splitlines())


class Corpus:
    """BM25 indexes over the descriptions and over the code of a fixed list of programs."""

    def __init__(self, programs: list[Program]):
        from rank_bm25 import BM25Okapi

        self.programs = list(programs)
        self._index: dict[str, Any] = {}
        if self.programs:
            self._index["description"] = BM25Okapi([tokenize(p.description) or ["<empty>"] for p in self.programs])
            self._index["code"] = BM25Okapi([tokenize(p.code) or ["<empty>"] for p in self.programs])

    def __len__(self) -> int:
        return len(self.programs)

    def best(self, query: str, by: str) -> Program | None:
        if by not in BY:
            raise ValueError(f"retrieval by {by!r}: choose description or code")
        if not self.programs:
            return None
        scores = self._index[by].get_scores(tokenize(query))
        top = max(range(len(self.programs)), key=lambda i: (scores[i], -i))
        return self.programs[top]


def corpus_programs(exclude_task: str) -> list[Program]:
    """The other tasks' expert baselines, minus anything equal to this task's own baseline."""
    from bench.registry import UnknownTaskError, all_tasks, get_task

    try:
        own = normalise(get_task(exclude_task).baseline_source())
    except (UnknownTaskError, OSError):
        own = None
    programs = []
    for task in sorted(all_tasks(), key=lambda t: t.id):
        if task.id == exclude_task:
            continue
        try:
            code = task.baseline_source()
        except OSError:
            continue  # a task without a readable baseline contributes nothing
        if own is not None and normalise(code) == own:
            continue
        programs.append(Program(task.id, task.instruction, code))
    return programs


def corpus_for(task_id: str) -> Corpus:
    """Cached per task and per registry size (a suite loaded later rebuilds the corpus)."""
    from bench.registry import all_tasks

    return _cached_corpus(task_id, len(all_tasks()))


@lru_cache(maxsize=256)
def _cached_corpus(task_id: str, n_tasks: int) -> Corpus:
    return Corpus(corpus_programs(task_id))


def retrieve(task_id: str, query: str, by: str) -> str | None:
    """The code of the best-matching program for `query`, never the task's own reference."""
    program = corpus_for(task_id).best(query, by)
    return program.code if program is not None else None
