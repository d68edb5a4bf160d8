"""What the autograded notebook keeps: the copy nbgrader's formgrader and ``generate_feedback`` render.

Both render it with nbconvert's HTML templates, which pass a rich output's HTML, JavaScript and SVG, an image's
metadata and a markdown cell's raw HTML through as they are (formgrade's markdown escapes the exporter's
``sanitize_html``), on the instructor's screen and in the Jupyter server's origin. So the copy written to
``autograded/`` holds text, PNG and JPEG outputs only, and the student's markdown with its raw HTML and harmful
link targets turned to text (docs/security.md, item 8). The student's own report (feedback.py) is built from the
notebook as it ran, escaped as it is written.
"""

from __future__ import annotations

import copy
import html
import re
from typing import Any

from nbformat import NotebookNode, from_dict

from .sanitize import students

BASE64 = re.compile(r"[A-Za-z0-9+/=\s]*")  # an image's data: nothing that could leave an attribute or a string
KEPT_MIME = ("text/plain", "image/png", "image/jpeg")
# A one-pixel transparent PNG, for an attachment of another type: its name stays, or nbconvert's markdown raises.
BLANK_PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_TAG = re.compile(r"<(?=[A-Za-z/!?])")  # every tag, closing tag, comment, declaration, CDATA and autolink
_BACKSLASHED = re.compile(r"\\([!-/:-@\[-`{-~])")  # markdown's escapes: javascript\: is javascript:
# A link target that runs or embeds something: as markdown decodes it (mistune decodes a target's character
# references twice, so java&amp;#115;cript: is javascript:). "data: 5 GB" is prose: a target has no space.
_HARMFUL = re.compile(r"(?<![a-z0-9+.\-])(?:javascript:|vbscript:|data:(?![ \t\r\n]))", re.I)
_LINK = re.compile(r"\](?=[(:])")  # an inline link or image, [text](target), and a definition, [label]: target
DECODINGS = 8


def _harmful(text: str) -> bool:
    """Whether a link target in markdown ``text`` could be harmful: whether the text holds a harmful scheme
    once decoded, as often as a renderer may (backslash escapes, character references), or more."""
    for _ in range(DECODINGS):
        if _HARMFUL.search(text):
            return True
        decoded = html.unescape(_BACKSLASHED.sub(r"\1", text))
        if decoded == text:
            return False
        text = decoded
    return True  # still decoding: taken as harmful


def _text(value: Any) -> str:
    if isinstance(value, list):
        return "".join(v for v in value if isinstance(v, str))
    return value if isinstance(value, str) else ""


def _image(value: Any) -> str | None:
    text = _text(value)
    return text if text.strip() and BASE64.fullmatch(text) else None


def inert_output(out: Any) -> dict[str, Any] | None:
    """``out`` as the staff's tools may show it, or None: a stream of stdout or stderr, an error's text, and
    of a rich output its plain text and PNG or JPEG image only (valid base64), without metadata."""
    if not isinstance(out, dict):
        return None
    kind = out.get("output_type")
    if kind == "stream":
        return {"output_type": "stream", "name": "stderr" if out.get("name") == "stderr" else "stdout",
                "text": _text(out.get("text"))}
    if kind == "error":
        tb = out.get("traceback")
        return {"output_type": "error", "ename": str(out.get("ename", "")), "evalue": str(out.get("evalue", "")),
                "traceback": [str(t) for t in tb] if isinstance(tb, list) else []}
    if kind not in ("display_data", "execute_result") or not isinstance(out.get("data"), dict):
        return None
    data = out["data"]
    kept = {"text/plain": _text(data["text/plain"])} if "text/plain" in data else {}
    kept |= {mime: image for mime in ("image/png", "image/jpeg") if (image := _image(data.get(mime))) is not None}
    if not kept:
        return None
    made = {"output_type": kind, "data": kept, "metadata": {}}
    if kind == "execute_result":
        count = out.get("execution_count")
        made["execution_count"] = count if type(count) is int else None
    return made


def inert_markdown(text: str) -> str:
    """A student's markdown with nothing a markdown renderer passes to a browser as markup or a script link: raw
    HTML shown as text (``<`` before a tag becomes ``&lt;``, everywhere, code and math included, where it shows
    as typed: a parse of markdown here that differed from the renderer's by one case would pass a tag), and,
    where the text holds a ``javascript:``, ``vbscript:`` or ``data:`` target however encoded, no link or image
    at all (``[text] (target)`` and ``[label] : target`` are text)."""
    text = _TAG.sub("&lt;", _CONTROL.sub("", text))
    return _LINK.sub("] ", text) if _harmful(text) else text


def inert(nb: NotebookNode) -> NotebookNode:
    """A copy of the annotated notebook ``nb`` that nbgrader's formgrader and generate_feedback may render: every
    output as ``inert_output`` keeps it (the verdicts and plots, printed text, tracebacks), every markdown cell of
    the student's as ``inert_markdown`` writes it, its attachments PNG or JPEG only."""
    out = copy.deepcopy(nb)
    for cell in out.cells:
        if cell.get("cell_type") == "code":
            cell["outputs"] = from_dict([o for o in map(inert_output, cell.get("outputs", [])) if o is not None])
        elif cell.get("cell_type") == "markdown" and students(cell):
            cell["source"] = inert_markdown(_text(cell.get("source")))
            if isinstance(cell.get("attachments"), dict):
                cell["attachments"] = {str(name): ({m: image for m in ("image/png", "image/jpeg") if isinstance(
                    bundle, dict) and (image := _image(bundle.get(m))) is not None} or {"image/png": BLANK_PNG})
                    for name, bundle in cell["attachments"].items()}
                cell["attachments"] = from_dict(cell["attachments"])
    return out
