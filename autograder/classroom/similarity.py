"""Code similarity across a class, for the course staff's eyes only: it never changes a score.

Each graded submission is reduced to the source of the functions students write (the spec's `functions`, as the
grader loads the file: a notebook's cells too). copydetect fingerprints them (MOSS's winnowing over normalised
tokens), with the released stub's fingerprints as boilerplate. The graded functions are short and most correct
answers look alike, so a pair is flagged only when it stands out against the class's own distribution: its score
above the class median by more than `SPREAD` median absolute deviations, and at least `FLOOR` of the tokens of
each side shared (after copydetect normalises names and strips comments).
"""
from __future__ import annotations

import ast
import hashlib
import io
import statistics
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

K, WINDOW = 20, 6          # copydetect's noise threshold (k-gram length) and winnowing window
FLOOR, SPREAD = 0.9, 4.0
MAX_STUDENTS = 2000        # pairs grow as n²: past this the check is skipped, and says so


@dataclass(frozen=True)
class Pair:
    a: str
    b: str
    score: float               # the smaller of the two shares of shared tokens
    code_a: str
    code_b: str


def graded_source(path: Path, functions: tuple[str, ...]) -> str:
    """The source of the graded functions and classes in a submission (the last definition of each, as run)."""
    from autograder.engine.submission import SubmissionError, load

    try:
        submission = load(path, set(functions))
    except SubmissionError:
        return ""
    source = submission.source
    found: dict[str, str] = {}
    for node in submission.tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name in functions:
            found[node.name] = ast.get_source_segment(source, node) or ast.unparse(node)
    return "\n\n".join(found[f] for f in functions if f in found)


def _stable_hash(text: str) -> int:
    """A k-gram's hash that is the same in every process (the built-in `hash` of a str is salted per process)."""
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "big",
                          signed=True)


def _fingerprint(code: str, boilerplate=None):
    import copydetect.utils
    from copydetect import CodeFingerprint

    # copydetect hashes k-grams with the built-in hash(), salted per process: the same class would get other scores
    # in another run. Its module-level name `hash` is looked up before the built-in, so a stable one goes there.
    copydetect.utils.hash = _stable_hash

    return CodeFingerprint("submission.py", K, WINDOW, boilerplate=boilerplate, fp=io.StringIO(code))


def similar_pairs(sources: dict[str, str], stub: str) -> dict:
    """{"pairs": [Pair...] flagged, most similar first, "median", "mad", "compared": n, "skipped": reason}."""
    from copydetect import compare_files

    sources = {s: code for s, code in sources.items() if code.strip()}
    if len(sources) < 3:
        return {"pairs": [], "compared": len(sources), "skipped": "fewer than 3 submissions with code"}
    if len(sources) > MAX_STUDENTS:
        return {"pairs": [], "compared": len(sources), "skipped": f"more than {MAX_STUDENTS} submissions"}
    boilerplate = list(_fingerprint(stub).hashes) if stub.strip() else []
    prints = {s: _fingerprint(code, boilerplate) for s, code in sources.items()}
    scores = {}
    for a, b in combinations(sorted(prints), 2):
        _, (share_a, share_b), _ = compare_files(prints[a], prints[b])
        scores[(a, b)] = float(min(share_a, share_b))  # both sides mostly shared: a small answer inside a big one is no copy
    values = list(scores.values())
    median = statistics.median(values)
    mad = statistics.median(abs(v - median) for v in values) or 0.01
    flagged = [Pair(a, b, score, sources[a], sources[b]) for (a, b), score in scores.items()
               if score >= FLOOR and (score - median) / mad > SPREAD]
    flagged.sort(key=lambda p: -p.score)
    return {"pairs": flagged, "median": median, "mad": mad, "compared": len(sources), "skipped": ""}
