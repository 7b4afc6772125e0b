"""MkDocs hook: the site's mathematics as MathML, written at build time.

`pymdownx.arithmatex` (generic mode) marks `$...$` and `$$...$$` in the pages as
`<span class="arithmatex">\\(...\\)</span>` and `<div class="arithmatex">\\[...\\]</div>`;
this hook converts each to MathML with `latex2mathml`, which browsers render natively:
no JavaScript, no font or CDN at view time. The pages may write the Unicode the rest of
the docs use (`α ≤ ‖h‖²`, `uᵀh`, `Σ_j`): each such operator is read as its LaTeX command
first, so that it is spaced and set as an operator, not as a letter. A formula that does
not convert (a syntax error, an unknown command, unbalanced braces) fails the build,
naming the page and the formula.
"""

from __future__ import annotations

import html
import re

from latex2mathml.converter import convert
from mkdocs.exceptions import PluginError

_MARKED = re.compile(
    r'<(?P<tag>span|div) class="arithmatex">'
    r"\\(?:\((?P<inline>.*?)\\\)|\[(?P<block>.*?)\\\])"
    r"</(?P=tag)>",
    flags=re.S,
)


# Unicode operators as their LaTeX commands (latex2mathml reads a bare one as a letter)
_UNICODE = {
    "−": "-", "≤": r"\le ", "≥": r"\ge ", "≠": r"\ne ", "≈": r"\approx ",
    "≡": r"\equiv ", "∝": r"\propto ", "∈": r"\in ", "→": r"\to ", "←": r"\leftarrow ",
    "↦": r"\mapsto ", "·": r"\cdot ", "×": r"\times ", "∇": r"\nabla ", "∂": r"\partial ",
    "‖": r"\|", "…": r"\ldots ", "⟨": r"\langle ", "⟩": r"\rangle ", "Σ": r"\sum ",
    "∞": r"\infty ", "⌈": r"\lceil ", "⌉": r"\rceil ", "ᵀ": r"^\top ",
    "²": "^2",
}  # fmt: skip


def _balanced(latex: str) -> bool:
    depth = 0
    for brace in re.findall(r"(?<!\\)[{}]", latex):
        depth += 1 if brace == "{" else -1
        if depth < 0:
            return False
    return depth == 0


def to_mathml(latex: str, display: bool) -> str:
    """The MathML of one formula; ValueError where it would not render as written."""
    if not _balanced(latex):
        raise ValueError("unbalanced braces")
    latex = "".join(_UNICODE.get(char, char) for char in latex)
    try:
        mathml = convert(latex, display="block" if display else "inline")
    except Exception as error:  # latex2mathml raises its own exception types
        raise ValueError(f"{type(error).__name__}: {error}") from error
    unknown = re.findall(r"\\[A-Za-z]+", mathml)
    if unknown:
        raise ValueError(f"unknown command(s) {sorted(set(unknown))}")
    return _polish(mathml)


def _polish(mathml: str) -> str:
    """Two symbols Chromium's MathML Core would set otherwise than TeX: a slash spaced as
    a relation, and `\\sim` as a letter."""
    mathml = mathml.replace("<mo>&#x0002F;</mo>", '<mo lspace="0" rspace="0">/</mo>')
    return mathml.replace("<mi>&#x0007E;</mi>", "<mo>&#x0223C;</mo>")


def on_page_content(html_text: str, page, config, files) -> str:
    def replace(match: re.Match[str]) -> str:
        display = match["block"] is not None
        latex = html.unescape(match["block"] if display else match["inline"]).strip()
        try:
            mathml = to_mathml(latex, display)
        except ValueError as error:
            raise PluginError(f"{page.file.src_uri}: ${latex}$: {error}") from None
        return f'<{match["tag"]} class="arithmatex">{mathml}</{match["tag"]}>'

    return _MARKED.sub(replace, html_text)
