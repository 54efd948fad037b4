"""Prompt-injection screening of retrieved text: flag text that tries to instruct the model.

Flagged chunks are still usable as evidence, but they are passed to a model as quoted JSON data with
their flags, never as instructions, and the extractive answerer never quotes a flagged sentence.
"""

from __future__ import annotations

import re

_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("override of instructions", re.compile(
        r"\b(ignore|disregard|forget|override)\b.{0,40}\b(previous|prior|above|earlier|all|any|your|the)\b.{0,30}"
        r"\b(instructions?|prompts?|rules|directions|guidelines|context)\b", re.I | re.S)),
    ("role reassignment", re.compile(
        r"\b(you are now|from now on,? you|act as (an?|the) |pretend (to be|you are)|new instructions?:|"
        r"developer mode|jailbreak)", re.I)),
    ("prompt or secret extraction", re.compile(
        r"\b(reveal|print|show|repeat|output|leak)\b.{0,30}\b(system prompt|instructions|api[ _-]?keys?|"
        r"passwords?|secrets?|credentials)\b", re.I | re.S)),
    ("chat-template tokens", re.compile(r"<\|(im_start|im_end|system|assistant|user|endoftext)\|>|\[/?INST\]|"
                                        r"<</?SYS>>|^\s*(system|assistant)\s*:", re.I | re.M)),
    ("tool-call look-alike", re.compile(r'"(tool_calls?|function_call)"\s*:|<tool_call>|<function[=>]|'
                                        r"```(tool|function)", re.I)),
    ("hidden markup", re.compile(r"<!--.*?-->|display\s*:\s*none|visibility\s*:\s*hidden|font-size\s*:\s*0",
                                 re.I | re.S)),
]


def screen(text: str) -> list[str]:
    """Reasons this text looks like an instruction to a model; [] when it reads as plain content."""
    return [reason for reason, pattern in _PATTERNS if pattern.search(text)]
