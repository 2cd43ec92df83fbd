"""The one bilingual text type: every student-facing sentence exists in Chinese (the course's language) and English.

    Text(zh="因果 mask 的形状", en="causal mask shape")      # keyword-only: a swapped pair cannot type-check
    text.pick("en")  ->  "causal mask shape"
"""
from __future__ import annotations

from dataclasses import dataclass

LANGS = ("zh", "en")


@dataclass(frozen=True, kw_only=True)
class Text:
    zh: str
    en: str

    def __post_init__(self):
        if not isinstance(self.zh, str) or not isinstance(self.en, str):
            raise TypeError("Text(zh=..., en=...) takes two strings")

    def pick(self, lang: str) -> str:
        if lang not in LANGS:
            raise ValueError(f"lang must be one of {LANGS}, not {lang!r}")
        return self.zh if lang == "zh" else self.en

    def __add__(self, other: "Text") -> "Text":
        return Text(zh=self.zh + other.zh, en=self.en + other.en)

    @property
    def both(self) -> str:
        """'zh / en', for places that show both at once (a Gradescope title, a failure message)."""
        return f"{self.zh} / {self.en}"
