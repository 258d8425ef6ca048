"""What the model is told: the summary instruction, and the checkpoint that stands in for a span.

Both are model input, and the checkpoint is logged (it is the replacing
``user/message``), so the layout follows dsh's: the checkpoint's content is one
text block holding a short preamble, a blank line and ``<compacted-summary>``,
then the summary's own text blocks, then a ``</compacted-summary>`` block. The tag
is what a later summary request recognises as an earlier checkpoint to merge (dsh's
instruction names it too), and the instruction asks for dsh's eight sections in
dsh's order, with ``(none)`` for an empty one, so summaries written by either
runtime merge into each other. The wording of both texts is dshpy's own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "CHECKPOINT_PREAMBLE",
    "SUMMARY_CLOSE_TAG",
    "SUMMARY_INSTRUCTION",
    "SUMMARY_OPEN_TAG",
    "SUMMARY_SECTIONS",
    "frame_summary",
    "summary_text_blocks",
]

SUMMARY_OPEN_TAG = "<compacted-summary>"
SUMMARY_CLOSE_TAG = "</compacted-summary>"

SUMMARY_SECTIONS = (
    (
        "Primary Request and Intent",
        "what the user asked for, and how the request changed; exact words where they matter",
    ),
    ("Key Technical Concepts", "languages, libraries, tools, patterns and conventions the work relies on"),
    ("Files and Code", "each relevant path, why it matters, and the changes or snippets that count"),
    ("Errors and Fixes", "each error met, how it was fixed, and what the user said about it"),
    ("Pending Jobs", "work that was asked for and is not finished"),
    ("Current Work", "exactly what was being done when this summary was taken"),
    ("Next Step", "the one next action that follows from the latest request, or (none)"),
    ("Critical Context", "decisions and why, constraints, preferences, open questions, values still needed"),
)
"""The summary's sections, in order (dsh's section list), each with what belongs in it."""


def _instruction() -> str:
    lines = [
        "Stop the task for a moment: your job now is to write a checkpoint of the conversation above, so that "
        "the work can go on from it alone once the earlier messages are gone.",
        "",
        "Use exactly these Markdown sections, in this order, with short bullet points. Keep every section; "
        'when one has nothing to say, write "(none)" under it.',
        "",
    ]
    for title, what in SUMMARY_SECTIONS:
        lines += [f"## {title}", f"- {what}", ""]
    lines += [
        "Rules:",
        "- Keep file paths, commands, identifiers, error messages, numbers and signatures exactly as written.",
        "- Record the user's instructions and corrections faithfully.",
        "- Write the checkpoint only: no tool calls, no remarks about this request or about summarizing.",
        f"- A {SUMMARY_OPEN_TAG} block above is an earlier checkpoint. Fold it into this one: keep what still "
        "holds, drop what no longer does, add what happened since, in the same sections.",
    ]
    return "\n".join(lines)


SUMMARY_INSTRUCTION = _instruction()
"""The last user message of a summary request, after the span's own messages."""

CHECKPOINT_PREAMBLE = (
    "Earlier turns of this conversation were condensed into the summary below to make room in the context. "
    "Take it as settled background and continue the work from the messages that follow; "
    "do not restate it or mention that it exists."
)
"""The sentence that opens every checkpoint, before the tagged summary."""


def summary_text_blocks(content: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The text blocks of a model answer (reasoning and tool calls are not part of a summary)."""
    return [dict(block) for block in content if block.get("type") == "text"]


def frame_summary(summary: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The checkpoint message's content: preamble and opening tag, the summary blocks, the closing tag."""
    return [
        {"type": "text", "text": f"{CHECKPOINT_PREAMBLE}\n\n{SUMMARY_OPEN_TAG}"},
        *(dict(block) for block in summary),
        {"type": "text", "text": SUMMARY_CLOSE_TAG},
    ]
