"""The audit lens module (`audit.py`, released to students and solutions alike): statistics, ignored tokens,
attention share, the JSON-lines audit log."""
from __future__ import annotations

import importlib.util
import io
import json
import math
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


audit = _load(ROOT / "solutions" / "attention" / "audit.py", "released_audit")
solution = _load(ROOT / "solutions" / "attention" / "attention.py", "released_attention")

EYE_CAUSAL = torch.eye(4)                                            # everyone looks at itself
UNIFORM = torch.tril(torch.ones(4, 4)) / torch.arange(1, 5).unsqueeze(1).float()   # row i: 1/(i+1) on j <= i
FIRST = torch.zeros(4, 4)
FIRST[:, 0] = 1.0                                                   # everyone looks at token 0


def test_released_copies_are_the_source():
    source = (ROOT / "assignments" / "attention" / "audit.py").read_text(encoding="utf-8")
    assert (ROOT / "solutions" / "attention" / "audit.py").read_text(encoding="utf-8") == source
    student = (ROOT / "student_template" / "attention" / "audit.py").read_text(encoding="utf-8")
    assert student.endswith(source) and student.count("\n") == source.count("\n") + 1  # plus the version line


def test_token_stats_on_known_patterns():
    stats = audit.token_stats(UNIFORM)
    assert set(stats) == {"entropy", "max_weight", "variance", "received"}
    assert torch.allclose(stats["entropy"], torch.log(torch.arange(1, 5).float()))
    assert torch.allclose(stats["max_weight"], 1 / torch.arange(1, 5).float())
    assert torch.allclose(stats["variance"], torch.zeros(4), atol=1e-7)      # even over the visible keys
    one_hot = audit.token_stats(FIRST)
    assert torch.equal(one_hot["entropy"], torch.zeros(4)) and not torch.signbit(one_hot["entropy"]).any()
    assert torch.equal(one_hot["max_weight"], torch.ones(4))
    assert one_hot["variance"][0] == 0 and one_hot["variance"][3] > 0
    assert torch.allclose(one_hot["received"], torch.tensor([1.0, 0.0, 0.0, 0.0]))


def test_received_counts_only_the_queries_that_can_see_a_token():
    # key j is visible to the 4 - j queries i >= j; with eye, each key gets 1 from exactly one of them
    assert torch.allclose(audit.attention_received(EYE_CAUSAL), 1 / torch.tensor([4.0, 3.0, 2.0, 1.0]))
    assert torch.allclose(audit.attention_received(EYE_CAUSAL, causal=False), torch.full((4,), 0.25))
    assert torch.equal(audit.attention_received(FIRST, query=-1), FIRST[-1])


def test_stats_keep_batch_and_head_dims():
    w = torch.softmax(torch.randn(2, 3, 5, 5, generator=torch.Generator().manual_seed(0)), dim=-1)
    stats = audit.token_stats(w, causal=False)
    assert all(v.shape == (2, 3, 5) for v in stats.values())
    assert audit.attention_share(w, [0, 1]).shape == (2, 3)
    assert audit.ignored_tokens(w).shape == (5,)


def test_ignored_tokens_across_a_batch():
    batch = torch.stack([FIRST, FIRST, FIRST])
    assert audit.ignored_tokens(batch).tolist() == [False, True, True, True]
    attended_once = batch.clone()
    attended_once[1, 3] = torch.tensor([0.0, 0.0, 0.5, 0.5])           # one sample looks at tokens 2 and 3
    assert audit.ignored_tokens(attended_once).tolist() == [False, True, False, False]
    assert audit.ignored_tokens(attended_once, query=-1).tolist() == [False, True, False, False]
    assert audit.ignored_tokens(attended_once, threshold=0.0).tolist() == [False] * 4


def test_attention_share_of_a_span():
    assert audit.attention_share(UNIFORM, [1, 2]).item() == pytest.approx(0.5)
    assert audit.attention_share(UNIFORM, range(4)).item() == pytest.approx(1.0)
    assert audit.attention_share(UNIFORM, torch.tensor([True, False, False, False]), query=1).item() == \
        pytest.approx(0.5)


def test_summarize_is_json_ready_and_averages_heads():
    heads = torch.stack([FIRST, EYE_CAUSAL])                         # (2, 4, 4)
    record = audit.summarize(heads, tokens=["系统", "b", "c", "d"])
    json.dumps(record)
    assert record["T"] == 4 and record["tokens"][0] == "系统"
    assert record["top"] == [0, 0, 0, 0] and record["max_weight"][0] == 1.0
    assert record["ignored"] == []
    with pytest.raises(ValueError):
        audit.summarize(heads, tokens=["only", "three", "tokens"])


def test_audit_log_writes_one_json_line_per_inference(tmp_path):
    path = tmp_path / "audit.jsonl"
    clock = iter([100.0, 101.5]).__next__
    with audit.AuditLog(path, clock=clock) as log:
        first = log.record(UNIFORM, tokens=list("abcd"), request="r1")
        log.record(torch.stack([FIRST, FIRST]), request="r2", user_share=0.25)
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 2
    records = [json.loads(line) for line in lines]
    assert records[0] == first
    assert [r["n"] for r in records] == [0, 1] and [r["time"] for r in records] == [100.0, 101.5]
    assert records[1]["request"] == "r2" and records[1]["user_share"] == 0.25 and "tokens" not in records[1]
    assert records[1]["ignored"] == [1, 2, 3]
    assert math.isclose(records[0]["entropy"][3], round(math.log(4), 4))
    assert audit.read_log(path) == records == audit.read_log(str(path))
    with audit.AuditLog(path, clock=lambda: 0.0) as log:                  # appends, never truncates
        log.record(EYE_CAUSAL)
    assert len(audit.read_log(path)) == 3


def test_audit_log_in_memory_and_reserved_keys():
    stream = io.StringIO()
    log = audit.AuditLog(stream, clock=lambda: 0.0)
    log.record(EYE_CAUSAL, tokens=["注入", "b", "c", "d"])
    assert "注入" in stream.getvalue()                                   # UTF-8 text, not \\u escapes
    assert audit.read_log(stream)[0]["tokens"][0] == "注入"
    assert audit.read_log(stream.getvalue()) == audit.read_log(stream)
    with pytest.raises(ValueError):
        log.record(EYE_CAUSAL, n=5)
    with pytest.raises(TypeError):
        audit.AuditLog(42)


def test_bad_weights_are_refused():
    for bad in (torch.ones(3, 4), torch.ones(4), torch.ones(3, 3, dtype=torch.long), [[1.0]]):
        with pytest.raises(ValueError):
            audit.token_stats(bad)


def test_on_the_solutions_causal_attention():
    torch.manual_seed(42)
    Q, K, V = torch.randn(4, 4), torch.randn(4, 4), torch.randn(4, 4)
    _, weights = solution.scaled_dot_product_attention(Q, K, V)
    stats = audit.token_stats(weights)
    assert stats["entropy"][0] == 0 and stats["max_weight"][0] == 1          # row 0 sees only itself
    assert torch.all(stats["entropy"] <= torch.log(torch.arange(1, 5).float()) + 1e-6)
    assert abs(stats["received"][3].item() - weights[3, 3].item()) < 1e-7     # the last token: seen by itself only
    record = audit.summarize(weights)
    assert record["top"][0] == 0 and len(record["variance"]) == 4
