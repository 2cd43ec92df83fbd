"""
The audit lens: small tools to look at attention weights the way an auditor would.
审计视角：像审计员一样检查注意力权重的小工具。

Attention weights are a matrix per sequence (and per head): row i says how query token i spreads
its attention over the key tokens j (every row sums to 1; with a causal mask, j <= i only).

    token_stats(weights)          per-token entropy, max weight, variance, attention received
    attention_received(weights)   how much attention each token gets from the tokens that can see it
    ignored_tokens(weights)       positions that get almost no attention across a whole batch
    attention_share(weights, ps)  the share of a query's attention that lands on positions ps
    summarize(weights)            a JSON-ready summary of one inference
    AuditLog(target)              an audit log: one JSON line per inference
    read_log(source)              read such a log back

Only torch and the standard library; nothing here is graded. / 只用 torch 和标准库；这里没有评分内容。
"""
import io
import json
import time
from pathlib import Path

import torch


def _check_weights(weights: torch.Tensor) -> torch.Tensor:
    """weights must be a float tensor (..., T, T); returns it (detached)."""
    if not isinstance(weights, torch.Tensor) or weights.dim() < 2 or weights.shape[-1] != weights.shape[-2]:
        shape = list(weights.shape) if isinstance(weights, torch.Tensor) else type(weights).__name__
        raise ValueError(f"weights must be a tensor of shape (..., T, T), got {shape}")
    if not weights.is_floating_point():
        raise ValueError(f"weights must be a float tensor, got {weights.dtype}")
    return weights.detach()


def _visible(T: int, causal: bool) -> torch.Tensor:
    """(T, T) bool: True where query i can see key j (j <= i when causal, everywhere otherwise)."""
    if not causal:
        return torch.ones(T, T, dtype=torch.bool)
    i = torch.arange(T)
    return i[None, :] <= i[:, None]


def attention_received(weights: torch.Tensor, causal: bool = True, query: "int | None" = None) -> torch.Tensor:
    """Attention each key token receives, averaged over the queries that can see it.

    Args:
        weights: (..., T, T), rows sum to 1.
        causal: key j is seen by the queries i >= j (True) or by all T queries (False).
        query: if given, count only this query row (e.g. -1: the token that produces the next output).

    Returns:
        (..., T): entry j = sum_i weights[..., i, j] / (number of queries that can see j), or
        weights[..., query, j] when `query` is given. 1.0 means every query that could look at token j
        looked only at it; 0.0 means nobody did.
    """
    weights = _check_weights(weights)
    if query is not None:
        return weights[..., query, :]
    T = weights.shape[-1]
    viewers = _visible(T, causal).sum(dim=-2).to(weights.dtype)  # (T,): queries that can see key j
    return weights.sum(dim=-2) / viewers


def token_stats(weights: torch.Tensor, causal: bool = True) -> dict[str, torch.Tensor]:
    """Per-token statistics of attention weights.

    Args:
        weights: (..., T, T); row i is query token i's attention over the keys, rows sum to 1.
        causal: whether query i can only see keys j <= i (the variance is taken over visible keys).

    Returns:
        a dict of tensors, each (..., T):
          "entropy":    entropy of row i in nats. 0 = all attention on one token;
                        log(number of visible keys) = spread evenly.
          "max_weight": the largest weight in row i (1.0 = looks at a single token).
          "variance":   variance of row i over the keys it can see (0 = perfectly even).
          "received":   attention received by key token j (see attention_received).
    """
    weights = _check_weights(weights)
    T = weights.shape[-1]
    visible = _visible(T, causal)                                           # (T, T)
    p = weights.clamp_min(0)
    entropy = -(p * torch.log(p.clamp_min(1e-30))).sum(dim=-1) + 0.0        # (..., T); + 0.0 turns -0.0 into 0.0
    count = visible.sum(dim=-1).to(weights.dtype)                           # (T,): keys row i can see
    mean = (weights * visible).sum(dim=-1) / count                          # (..., T)
    variance = (((weights - mean.unsqueeze(-1)) ** 2) * visible).sum(dim=-1) / count
    return {
        "entropy": entropy,
        "max_weight": weights.max(dim=-1).values,
        "variance": variance,
        "received": attention_received(weights, causal),
    }


def ignored_tokens(weights: torch.Tensor, threshold: float = 0.05, causal: bool = True,
                   query: "int | None" = None) -> torch.Tensor:
    """Positions that receive almost no attention across a whole batch.

    Args:
        weights: (..., T, T) for a batch of sequences (and heads): every leading dim counts as "the batch".
        threshold: a position is ignored when its received attention (see attention_received) stays below
            this value in every sequence and head. Pick it relative to T: even attention gives about 1/T.
        causal, query: as in attention_received.

    Returns:
        bool tensor (T,): True at the ignored positions.
    """
    received = attention_received(weights, causal, query)        # (..., T)
    return (received.reshape(-1, received.shape[-1]) < threshold).all(dim=0)


def attention_share(weights: torch.Tensor, positions, query: int = -1) -> torch.Tensor:
    """Share of one query's attention that lands on the given key positions.

    Args:
        weights: (..., T, T).
        positions: key positions (a list of ints, a range or a bool mask of shape (T,)).
        query: which query row to look at (default: the last token, the one that produces the next output).

    Returns:
        (...): a number between 0 and 1 per sequence (and head).
    """
    weights = _check_weights(weights)
    T = weights.shape[-1]
    if isinstance(positions, torch.Tensor) and positions.dtype == torch.bool:
        mask = positions
    else:
        mask = torch.zeros(T, dtype=torch.bool)
        mask[list(positions)] = True
    return (weights[..., query, :] * mask).sum(dim=-1)


def summarize(weights: torch.Tensor, tokens=None, threshold: float = 0.05, causal: bool = True,
              digits: int = 4) -> dict:
    """A JSON-ready summary of the attention of one inference.

    Args:
        weights: (T, T) or (..., T, T) for ONE input; leading dims (heads, layers) are averaged into one map.
        tokens: optional list of T token labels (strings), stored as they are.
        threshold: for the "ignored" list (see ignored_tokens).
        digits: rounding of the floats.

    Returns:
        {"T": T, "tokens": [...], "max_weight": [T floats], "entropy": [...], "variance": [...],
         "received": [...], "top": [for each query, the key it attends to most], "ignored": [positions]}
    """
    weights = _check_weights(weights)
    T = weights.shape[-1]
    mean_map = weights.reshape(-1, T, T).mean(dim=0)              # (T, T)
    stats = token_stats(mean_map, causal)
    rounded = lambda t: [round(float(x), digits) for x in t]       # noqa: E731
    record = {"T": T}
    if tokens is not None:
        if len(tokens) != T:
            raise ValueError(f"{len(tokens)} tokens for weights over {T} positions")
        record["tokens"] = [str(t) for t in tokens]
    record.update({name: rounded(value) for name, value in stats.items()})
    record["top"] = [int(j) for j in mean_map.argmax(dim=-1)]
    record["ignored"] = [int(j) for j in torch.nonzero(stats["received"] < threshold).flatten()]
    return record


class AuditLog:
    """An attention audit log: one JSON line per inference, appended to a file or written to a text stream.

        log = AuditLog("audit.jsonl")          # or AuditLog(io.StringIO()) to keep it in memory
        log.record(weights, tokens=words, request_id="r-17")
        log.close()

    Each line is summarize(weights, tokens) plus "n" (a running number), "time" (seconds since the epoch,
    from `clock`) and any keyword metadata you pass (it must be JSON-serialisable).
    """

    def __init__(self, target, clock=time.time, threshold: float = 0.05, causal: bool = True):
        if isinstance(target, (str, Path)):
            self.stream, self._owned = open(target, "a", encoding="utf-8"), True
        elif isinstance(target, io.TextIOBase) or hasattr(target, "write"):
            self.stream, self._owned = target, False
        else:
            raise TypeError(f"AuditLog needs a path or a text stream, got {type(target).__name__}")
        self.clock, self.threshold, self.causal = clock, threshold, causal
        self.count = 0

    def record(self, weights: torch.Tensor, tokens=None, **meta) -> dict:
        """Summarise one inference's weights (T, T) or (heads, T, T), write it as one line, return the record."""
        entry = {"n": self.count, "time": self.clock()}
        entry.update(summarize(weights, tokens, self.threshold, self.causal))
        clash = set(meta) & set(entry)
        if clash:
            raise ValueError(f"metadata keys {sorted(clash)} are reserved")
        entry.update(meta)
        line = json.dumps(entry, ensure_ascii=False, allow_nan=False)
        self.stream.write(line + "\n")
        self.stream.flush()
        self.count += 1
        return entry

    def close(self) -> None:
        if self._owned:
            self.stream.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def read_log(source) -> list[dict]:
    """The records of an audit log (a path, a text stream, or the log's text itself), in order."""
    if isinstance(source, Path) or (isinstance(source, str) and "\n" not in source and _is_file(source)):
        text = Path(source).read_text(encoding="utf-8")
    elif hasattr(source, "getvalue"):
        text = source.getvalue()
    elif hasattr(source, "read"):
        text = source.read()
    else:
        text = str(source)
    return [json.loads(line) for line in text.splitlines() if line.strip()]



def _is_file(name: str) -> bool:
    try:
        return Path(name).is_file()
    except (OSError, ValueError):  # e.g. a name too long to be a path
        return False
