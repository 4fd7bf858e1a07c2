"""LaTeX as a reader reads it in plain text: ``\\frac{p}{2}`` as ``p/2``, ``\\varepsilon`` as ``ε``.

The site writes each formula's readable text into the page and keeps the LaTeX beside it for MathJax
(``specbound_docs``): what a page shows before (or without) MathJax, and what the search shows in its
result snippets (Sphinx's search fetches a page and shows the text of its main element), is this text,
never raw LaTeX.

Only the LaTeX the site holds needs to read well (SymPy's printer, the docstrings' ``.. math::`` blocks,
the notebooks' formulas); a command this module does not know is written as its name, and no output
holds a backslash.
"""

from __future__ import annotations

import re

__all__ = ["readable"]

_GREEK = {
    "alpha": "α",
    "beta": "β",
    "gamma": "γ",
    "delta": "δ",
    "epsilon": "ϵ",
    "varepsilon": "ε",
    "zeta": "ζ",
    "eta": "η",
    "theta": "θ",
    "vartheta": "ϑ",
    "iota": "ι",
    "kappa": "κ",
    "lambda": "λ",
    "mu": "μ",
    "nu": "ν",
    "xi": "ξ",
    "pi": "π",
    "varpi": "ϖ",
    "rho": "ρ",
    "varrho": "ϱ",
    "sigma": "σ",
    "varsigma": "ς",
    "tau": "τ",
    "upsilon": "υ",
    "phi": "ϕ",
    "varphi": "φ",
    "chi": "χ",
    "psi": "ψ",
    "omega": "ω",
    "Gamma": "Γ",
    "Delta": "Δ",
    "Theta": "Θ",
    "Lambda": "Λ",
    "Xi": "Ξ",
    "Pi": "Π",
    "Sigma": "Σ",
    "Upsilon": "Υ",
    "Phi": "Φ",
    "Psi": "Ψ",
    "Omega": "Ω",
}

_SYMBOLS = {
    **_GREEK,
    "cdot": "·",
    "times": "×",
    "div": "÷",
    "pm": "±",
    "mp": "∓",
    "leq": "≤",
    "le": "≤",
    "geq": "≥",
    "ge": "≥",
    "neq": "≠",
    "ne": "≠",
    "approx": "≈",
    "sim": "~",
    "simeq": "≃",
    "equiv": "≡",
    "propto": "∝",
    "ll": "≪",
    "gg": "≫",
    "infty": "∞",
    "sum": "∑",
    "prod": "∏",
    "int": "∫",
    "partial": "∂",
    "nabla": "∇",
    "in": "∈",
    "notin": "∉",
    "subset": "⊂",
    "subseteq": "⊆",
    "cup": "∪",
    "cap": "∩",
    "forall": "∀",
    "exists": "∃",
    "to": "→",
    "rightarrow": "→",
    "leftarrow": "←",
    "Rightarrow": "⇒",
    "Leftarrow": "⇐",
    "iff": "⇔",
    "Leftrightarrow": "⇔",
    "mapsto": "↦",
    "ldots": "…",
    "dots": "…",
    "cdots": "⋯",
    "vdots": "⋮",
    "prime": "′",
    "langle": "⟨",
    "rangle": "⟩",
    "lVert": "‖",
    "rVert": "‖",
    "Vert": "‖",
    "|": "‖",
    "lvert": "|",
    "rvert": "|",
    "vert": "|",
    "mid": "|",
    "lfloor": "⌊",
    "rfloor": "⌋",
    "lceil": "⌈",
    "rceil": "⌉",
    "circ": "∘",
    "star": "⋆",
    "ast": "∗",
    "wedge": "∧",
    "vee": "∨",
    "emptyset": "∅",
    "varnothing": "∅",
    "top": "⊤",
    "intercal": "⊺",
    "ell": "ℓ",
    "hbar": "ℏ",
    "{": "{",
    "}": "}",
    "%": "%",
    "#": "#",
    "_": "_",
    "$": "$",
    "&": "&",
}

#: Operators and relations, written with a space on each side.
_BINARY = {
    "cdot", "times", "div", "pm", "mp", "leq", "le", "geq", "ge", "neq", "ne", "approx", "sim", "simeq", "equiv",
    "propto", "ll", "gg", "in", "notin", "subset", "subseteq", "cup", "cap", "to", "rightarrow", "leftarrow",
    "Rightarrow", "Leftarrow", "iff", "Leftrightarrow", "mapsto", "circ", "wedge", "vee", "mid",
}  # fmt: skip

#: Commands printed as their name (operators and functions).
_WORDS = {
    "log", "ln", "exp", "min", "max", "sup", "inf", "lim", "sin", "cos", "tan", "det", "dim", "arg", "deg",
    "gcd", "Pr", "sinh", "cosh", "tanh", "limsup", "liminf", "argmin", "argmax", "sgn", "sign", "tr", "rank",
}  # fmt: skip

#: Commands that change only how their argument looks: the argument is kept.
_FONTS = {
    "mathrm", "mathit", "mathbf", "mathsf", "mathtt", "mathnormal", "boldsymbol", "bm", "text", "textrm",
    "textit", "textbf", "texttt", "textsf", "emph", "mbox", "hbox", "operatorname", "mathop", "mathord",
    "mathbin", "mathrel", "displaystyle", "textstyle", "mathscr", "mathfrak",
}  # fmt: skip

#: Commands that print nothing (sizes, spacing that closes up, style switches without an argument).
_SILENT = {
    "left", "right", "big", "Big", "bigg", "Bigg", "bigl", "bigr", "Bigl", "Bigr", "biggl", "biggr", "Biggl",
    "Biggr", "displaystyle", "textstyle", "scriptstyle", "limits", "nolimits", "!", "nonumber", "notag",
    "middle",
}  # fmt: skip

_SPACES = {",", ";", ":", " ", "quad", "qquad", "enspace", "thinspace", "medspace", "thickspace"}

_DOUBLE_STRUCK = {"R": "ℝ", "N": "ℕ", "Z": "ℤ", "Q": "ℚ", "C": "ℂ", "E": "𝔼", "P": "ℙ", "1": "𝟙"}
_CALLIGRAPHIC = {"N": "𝒩", "F": "ℱ", "L": "ℒ", "H": "ℋ", "O": "𝒪", "R": "ℛ", "B": "ℬ", "E": "ℰ", "M": "ℳ", "P": "𝒫"}

_SUPER = str.maketrans("0123456789+-=()ni", "⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁼⁽⁾ⁿⁱ")
_SUB = str.maketrans("0123456789+-=()", "₀₁₂₃₄₅₆₇₈₉₊₋₌₍₎")

_ACCENTS = {"hat": "\u0302", "widehat": "\u0302", "tilde": "\u0303", "widetilde": "\u0303", "bar": "\u0304",
            "overline": "\u0305", "vec": "\u20d7", "dot": "\u0307", "ddot": "\u0308"}  # fmt: skip

_TOKEN = re.compile(r"\\([a-zA-Z]+\*?|.)|([{}^_&~])|(\s+)|(.)", re.S)


class _Parser:
    def __init__(self, latex: str) -> None:
        self.tokens = [(m.group(1), m.group(2), m.group(3), m.group(4)) for m in _TOKEN.finditer(latex)]
        self.i = 0

    def _peek(self) -> tuple[str | None, ...] | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def _skip_space(self) -> None:
        while (tok := self._peek()) is not None and tok[2] is not None:
            self.i += 1

    def argument(self) -> str:
        """The next argument: a ``{...}`` group, or one token."""
        self._skip_space()
        tok = self._peek()
        if tok is None:
            return ""
        if tok[1] == "{":
            self.i += 1
            return self.until("}")
        self.i += 1
        return self.one(tok)

    def optional(self) -> str | None:
        """An optional ``[...]`` argument, if one follows."""
        self._skip_space()
        tok = self._peek()
        if tok is None or tok[3] != "[":
            return None
        self.i += 1
        out = []
        while (tok := self._peek()) is not None and tok[3] != "]":
            self.i += 1
            out.append(self.one(tok))
        self.i += 1
        return "".join(out)

    def until(self, closer: str | None) -> str:
        out: list[str] = []
        while (tok := self._peek()) is not None:
            if closer is not None and tok[1] == closer:
                self.i += 1
                break
            self.i += 1
            out.append(self.one(tok))
        return "".join(out)

    def one(self, tok: tuple[str | None, ...]) -> str:
        command, special, space, char = tok
        if space is not None:
            return " "
        if char is not None:
            return char
        if special is not None:
            if special == "{":
                return self.until("}")
            if special == "}":
                return ""
            if special == "^":
                return _script(self.argument(), _SUPER, "^")
            if special == "_":
                return _script(self.argument(), _SUB, "_")
            if special == "&":
                return " "
            return " "  # ~: a non-breaking space
        assert command is not None
        name = command.rstrip("*")
        if name in ("frac", "dfrac", "tfrac", "cfrac"):
            top, bottom = self.argument(), self.argument()
            return f"{_wrap(top)}/{_wrap(bottom)}"
        if name == "binom":
            top, bottom = self.argument(), self.argument()
            return f"C({top.strip()}, {bottom.strip()})"
        if name == "sqrt":
            index = self.optional()
            body = self.argument()
            return (index.translate(_SUPER) if index else "") + "√" + _wrap(body)
        if name in ("begin", "end"):
            self.argument()  # the environment's name
            return " "
        if name == "\\":
            return "; "
        if name in _SPACES:
            return " "
        if name in ("left", "right", "bigl", "bigr", "Bigl", "Bigr", "big", "Big", "bigg", "Bigg", "middle"):
            self._skip_space()
            nxt = self._peek()
            if nxt is not None and nxt[3] == ".":  # \left. : no delimiter
                self.i += 1
            return ""
        if name in _SILENT:
            return ""
        if name in _ACCENTS:
            body = self.argument().strip()
            return body + _ACCENTS[name] if len(body) == 1 else f"{name}({body})"
        if name == "mathbb":
            body = self.argument().strip()
            return _DOUBLE_STRUCK.get(body, body)
        if name == "mathcal":
            body = self.argument().strip()
            return _CALLIGRAPHIC.get(body, body)
        if name in _FONTS:
            if name in ("displaystyle", "textstyle"):
                return ""
            return self.argument()
        if name in ("operatorname",):
            return self.argument()
        if name in _SYMBOLS:
            return f" {_SYMBOLS[name]} " if name in _BINARY else _SYMBOLS[name]
        if name in _WORDS:
            return f" {name} "
        if name in ("not",):
            return "not "
        return name if name.isalpha() else ""


def _wrap(text: str) -> str:
    """``text`` in parentheses unless it is one symbol, a number, or bracketed already."""
    text = " ".join(text.split())
    if re.fullmatch(r"√?[^\W_]+(?:\.\d+)?(?:_[^\W_]+)?[⁰¹²³⁴⁵⁶⁷⁸⁹]*′*", text) or (
        text.startswith("(") and text.endswith(")") and _balanced(text[1:-1])
    ):
        return text
    return f"({text})"


def _balanced(text: str) -> bool:
    depth = 0
    for c in text:
        depth += {"(": 1, ")": -1}.get(c, 0)
        if depth < 0:
            return False
    return depth == 0


def _script(body: str, table: dict[int, str], mark: str) -> str:
    """A super- or subscript: in Unicode script digits when every character has one, else ``^(...)``/``_...``."""
    body = " ".join(body.split())
    body = re.sub(r"^([-+−]) ", r"\1", body)  # "- p/2" as "-p/2"
    compact = body.replace(" ", "")
    if compact and set(compact) == {"′"}:  # y^{\prime}
        return compact
    if compact and all(ord(c) in table for c in compact):
        return compact.translate(table)
    if re.fullmatch(r"[^\W_]+(?:\.\d+)?", body):  # one symbol or number: no parentheses
        return mark + body
    return mark + f"({body})" if "_" in body or "^" in body else mark + _wrap(body)


def readable(latex: str) -> str:
    """Plain text for the formula ``latex`` (with or without its ``\\(``, ``\\[`` delimiters); no backslash.

    >>> readable(r"2 p^{- \\frac{p}{2}} \\varepsilon^{-p}")
    '2 p^(-p/2) ε^(-p)'
    >>> readable(r"\\left\\|W\\right\\|_{F}^{2}")
    '‖W‖_F²'
    """
    text = latex.strip()
    for opener, closer in (("\\(", "\\)"), ("\\[", "\\]"), ("$$", "$$")):
        if text.startswith(opener) and text.endswith(closer):
            text = text[len(opener) : -len(closer)]
            break
    out = _Parser(text).until(None)
    out = " ".join(out.split())
    out = re.sub(r"\s+([,;.)\]}!])", r"\1", out)
    out = re.sub(r"([(\[{])\s+", r"\1", out)
    out = re.sub(r"(?:;\s*)+$", "", out).strip()
    out = re.sub(rf"\b({'|'.join(sorted(_WORDS))}) (?=\()", r"\1", out)  # log (x) as log(x)
    return out.replace("\\", "")
