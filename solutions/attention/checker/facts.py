"""Published facts: the public inputs, the expected results on them and what each catalogued mistake returns on
them, written by `autograder release` into `public_facts.json` beside the public checks (computed there from the
solution and the chapter's diagnosis variants; no hidden input, no solution code).

A public check compares the student's result with `case.expected` and, when it differs, asks `case.name(...)`:
the catalogued mistake whose recorded result matches (within MATCH_ATOL + MATCH_RTOL * |value|, NaN matching NaN)
is named, with the grader's own diagnosis text, when exactly one mistake does; otherwise nothing is.

    facts = load(Path(__file__).with_name("public_facts.json"))
    case = facts["seed42"]                    # .inputs["Q"], .expected["weights"], .variants
    case.name(output=out, weights=weights)    # -> Diagnosis | None
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import torch

from .expect import Diagnosis
from .text import Text

MATCH_ATOL, MATCH_RTOL = 1e-4, 1e-3
DTYPES = {"float32": torch.float32, "bool": torch.bool, "int64": torch.int64}


def encode(t: torch.Tensor) -> dict:
    """A tensor as JSON: shape, dtype and the flat values (floats to 8 significant digits, NaN/inf kept)."""
    t = t.detach()
    dtype = str(t.dtype).removeprefix("torch.")
    values = t.reshape(-1).tolist()
    if t.is_floating_point():
        values = [v if not math.isfinite(v) else float(f"{v:.8g}") for v in values]
        dtype = "float32"
    return {"shape": list(t.shape), "dtype": dtype, "data": values}


def decode(value: dict) -> torch.Tensor:
    return torch.tensor(value["data"], dtype=DTYPES[value["dtype"]]).reshape(value["shape"])


def same(a, b: torch.Tensor) -> bool:
    return (type(a) is torch.Tensor and a.shape == b.shape and a.dtype != torch.bool and b.dtype != torch.bool
            and torch.allclose(a.double(), b.double(), atol=MATCH_ATOL, rtol=MATCH_RTOL, equal_nan=True)) or (
        type(a) is torch.Tensor and a.dtype == b.dtype == torch.bool and a.shape == b.shape and torch.equal(a, b))


@dataclass(frozen=True)
class Case:
    inputs: dict[str, torch.Tensor]
    expected: dict[str, torch.Tensor]
    variants: tuple[tuple[Diagnosis, dict[str, torch.Tensor]], ...]

    def name(self, **got) -> Diagnosis | None:
        """The one catalogued mistake whose recorded values match every value of `got` it records (at least one),
        or None when none or several different mistakes do."""
        found: dict[str, Diagnosis] = {}
        for diagnosis, values in self.variants:
            shared = [k for k in got if k in values]
            if shared and all(same(got[k], values[k]) for k in shared):
                found.setdefault(diagnosis.id, diagnosis)
        return next(iter(found.values())) if len(found) == 1 else None


@dataclass(frozen=True)
class Facts:
    cases: dict[str, Case]
    texts: dict[str, Diagnosis]  # diagnoses a public check names by rule (e.g. outputs swapped), by id
    assignment: dict             # what the checker says about the assignment (see `dumps`)

    def __getitem__(self, case: str) -> Case:
        return self.cases[case]

    def diagnosis(self, key: str, **values) -> Diagnosis:
        """The published diagnosis `key` with its {placeholders} filled in from `values`."""
        d = self.texts[key]
        zh, en = d.zh, d.en
        for k, v in values.items():
            zh, en = zh.replace("{" + k + "}", str(v)), en.replace("{" + k + "}", str(v))
        return Diagnosis(d.id, Text(zh=zh, en=en))


def _tensors(values: dict) -> dict[str, torch.Tensor]:
    return {k: decode(v) for k, v in values.items()}


def load(path: Path) -> Facts:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    diagnosis = lambda d: Diagnosis(d["id"], Text(zh=d["zh"], en=d["en"]))
    cases = {name: Case(_tensors(c["inputs"]), _tensors(c["expected"]),
                        tuple((diagnosis(v), _tensors(v["values"])) for v in c["variants"]))
             for name, c in data["cases"].items()}
    return Facts(cases, {k: diagnosis({"id": k, **v}) for k, v in data.get("texts", {}).items()}, data["assignment"])


def dumps(assignment: dict, cases: dict, texts: dict[str, Diagnosis]) -> str:
    """The JSON the release writes. `assignment`: what the checker says about the assignment (id, title, file
    names, functions, hidden topics). `cases`: name -> {"inputs": {k: tensor}, "expected": {k: tensor},
    "variants": [(Diagnosis, {k: tensor})]}; a variant that equals the expected result is left out (a mistake
    that agrees with the solution on this input cannot be the one shown)."""
    out = {}
    for name, case in cases.items():
        expected = case["expected"]
        variants = []
        for diag, values in case["variants"]:
            if all(k in expected and same(values[k].float() if values[k].is_floating_point() else values[k],
                                          expected[k].float() if expected[k].is_floating_point() else expected[k])
                   for k in values):
                continue
            variants.append({"id": diag.id, "zh": diag.zh, "en": diag.en,
                             "values": {k: encode(v) for k, v in values.items()}})
        out[name] = {"inputs": {k: encode(v) for k, v in case["inputs"].items()},
                     "expected": {k: encode(v) for k, v in expected.items()}, "variants": variants}
    data = {"assignment": assignment, "cases": out,
            "texts": {k: {"zh": d.zh, "en": d.en} for k, d in sorted(texts.items())}}
    return json.dumps(data, ensure_ascii=False, sort_keys=True, separators=(",", ":")) + "\n"


class Lazy:
    """`load(path)` on first use: a chapter's public checks import before the release has written the file."""

    def __init__(self, path: Path):
        self.path, self._facts = Path(path), None

    def get(self) -> Facts:
        if self._facts is None:
            self._facts = load(self.path)
        return self._facts

    def __getitem__(self, case: str) -> Case:
        return self.get()[case]

    @property
    def texts(self) -> dict[str, Diagnosis]:
        return self.get().texts

    @property
    def assignment(self) -> dict:
        return self.get().assignment

    def diagnosis(self, key: str, **values) -> Diagnosis:
        return self.get().diagnosis(key, **values)
