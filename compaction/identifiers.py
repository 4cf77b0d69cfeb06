"""What counts as an identifier: the one definition used by the extractive summarizer's
"Files and paths" section and by the retention score.

Identifiers are the concrete handles an agent needs to continue work after a summary.
Each kind is a regular expression plus a cleaner that returns the identifier or None:

``url``           ``http(s)://``, ``ftp://``, ``file://``, ``ws(s)://`` URLs
``path``          file paths: unix (``/etc/hosts``, ``./a.sh``, ``src/app/models.py``), windows
                  (``C:\\Users\\me\\x.txt``) and bare file names with a known extension
                  (``setup.cfg``) or a well-known name (``Makefile``)
``uuid``          ``8-4-4-4-12`` hex UUIDs
``hex_id``        hex runs of 7+ characters holding both a digit and a letter (git shas, hashes)
``number_unit``   a number with a unit or counted noun (``200 ms``, ``3.5GB``, ``95%``, ``$20``)
``error``         error class names ``\\w+(Error|Exception|Warning)``
``code``          code identifiers of 4+ characters with an ``_``, a ``.`` or an inner capital
``quoted``        quoted strings (``"..."``, ``'...'``, `````...`````, ``“...”``, ``「...」``), 3-80 characters

Paths and URLs are read the same way by both users (:func:`find_paths` is the running-text
form, :data:`TOKEN_PASSES` the per-token form of the retention score). Where the two used
to differ, the rule kept is:

- URLs: every scheme above (not only http), ending at whitespace, quotes, brackets,
  backslashes and pipes, so ``https://x.org/a\\n`` written inside JSON is ``https://x.org/a``
  and not ``https://x.org/a\\n``; trailing punctuation and a closing parenthesis are dropped.
- Path boundaries are ASCII, so a path glued to CJK text (``见src/app.py``) is still found;
  a path may follow ``:`` (``PATH=/usr/bin:/usr/local/bin`` holds two) but not ``<``
  (``</output>`` is a closing tag, not a path).
- A path without a leading ``/``, ``./``, ``../`` or ``~/`` needs two slashes or a file
  extension: ``text/html``, ``added/changed`` and ``and/or`` are words, ``src/app/`` and
  ``docs/x.md`` are paths. Dates and fractions (``2024/01/02``) are not paths, nor is a
  lone ``a/`` from a diff header, nor anything starting with ``//``.
- A rooted path needs a segment after its root holding a letter or digit and, with a
  single segment, a slash after it or an extension (``/srv/``, ``./run.sh``); ``/tmp``
  alone is too easily a tag or a route to count.
- A bare file name needs a known extension (one list for both), checked on the last dot
  of the whole dotted name; very short extensions that are also common attribute names
  (``.so``, ``.map``, ``.key``, ``.db``...) are left out of that list, so ``self.map``
  and ``django.db`` are code, not files.
"""
from __future__ import annotations

import re

_A = re.ASCII
_TRAILING = ".,;:!?"
MAX_PATH_LEN = 200

URL_RE = re.compile(r"""\b(?:https?|ftp|file|wss?)://[^\s<>"'`|\\^{}\[\]]+""", re.IGNORECASE)

# File extensions that make a bare name a file name (lower case; compared case-insensitively).
EXTENSIONS = frozenset((
    "py pyi pyx ipynb js mjs cjs jsx ts tsx vue svelte json jsonl md rst txt yml yaml toml cfg ini "
    "go rs java kt scala c h cc cpp hpp cs rb php pl lua swift dart r sh bash zsh ps1 bat html htm "
    "css scss less sql xml csv tsv lock gradle proto log patch diff tex dcm mk tmpl tpl j2 pem crt "
    "png jpg jpeg gif svg pdf zip tar gz"
).split())
SPECIAL_FILES = ("Makefile", "Dockerfile", "Containerfile", "Jenkinsfile", "Vagrantfile", "Gemfile",
                 "Rakefile", "Procfile", "Justfile", "CMakeLists.txt", "README", "LICENSE", "CHANGELOG")

_SEG = r"(?>[A-Za-z0-9_@+.$-]+)"          # atomic: no backtracking inside a segment
_STEM = r"(?>[A-Za-z0-9_@+$-]+)"
_NAME = r"(?>[A-Za-z0-9_][A-Za-z0-9_@+$-]*)"   # a bare file name starts with a letter, digit or _
PATH_RE = re.compile(
    r"(?<![A-Za-z0-9_/~.@+$\\<-])(?:"
    r"[A-Za-z]:(?:\\{1,2}" + _SEG + r")+\\{0,2}"        # windows: C:\dir\file (JSON-escaped too)
    r"|(?:~|\.{1,2})?(?:/" + _SEG + r")+/?"                  # absolute, ~/..., ./..., ../...
    r"|" + _SEG + r"(?:/" + _SEG + r")+/?"                   # relative with a slash
    r"|" + _NAME + r"(?:\." + _STEM + r")+"                  # name.ext (extension checked in clean_path)
    r"|(?:" + "|".join(re.escape(s) for s in SPECIAL_FILES) + r")(?![A-Za-z0-9_.])"
    r")",
    _A,
)
_HAS_ALNUM = re.compile(r"[A-Za-z0-9]")
_EXT_TAIL = re.compile(r"\.[A-Za-z0-9]{1,10}$")
_DATE_LIKE = re.compile(r"[\d/.:-]+")
_ROOTS = ("/", "./", "../", "~/")


def _clean_windows(p: str) -> str | None:
    p = p.replace("\\\\", "\\")
    # "f:\n" in JSON-escaped text is an escape sequence, not a drive and a folder.
    if len(p) < 4 or all(len(part) <= 1 for part in p[2:].split("\\")):
        return None
    return p


def clean_path(raw: str, *, named: bool = False) -> str | None:
    """The path in a match of :data:`PATH_RE` (trailing punctuation dropped), or None.

    ``named``: the text is known to name a file (a tool's path argument, the target of a
    shell redirection), so a bare name needs no extension and ``/tmp`` is a path too.
    """
    p = raw.rstrip(_TRAILING + "'\"`")
    if not p or len(p) > MAX_PATH_LEN or not _HAS_ALNUM.search(p):
        return None
    if "\\" in p:
        return _clean_windows(p)
    if "/" not in p:
        if named or p in SPECIAL_FILES:
            return p
        # a bare file name: only with a known extension (os.path.join is code, setup.cfg a file)
        return p if "." in p and p.rsplit(".", 1)[1].lower() in EXTENSIONS else None
    if p.startswith("//"):
        return None
    parts = [c for c in p.split("/") if c not in ("", ".", "..", "~")]
    if not parts or any(not _HAS_ALNUM.search(c) for c in parts):
        return None
    rooted = p.startswith(_ROOTS)
    if p.endswith("/"):
        # a directory: "src/app/" is one, "a/" from a diff header is not
        return p if rooted or len(parts) >= 2 else None
    if not (p.count("/") >= 2 or _EXT_TAIL.search(p) or (rooted and (named or len(parts) >= 2))):
        return None  # "and/or", "input/output", "/tmp"
    if _DATE_LIKE.fullmatch(p):
        return None  # dates, fractions
    return p


def clean_url(raw: str) -> str | None:
    """The URL in a match of :data:`URL_RE` (trailing punctuation dropped), or None."""
    u = raw.rstrip(_TRAILING + ")'\"")
    return u if len(u) > 10 else None


_SPECIAL_FILE = re.compile("|".join(re.escape(s) for s in SPECIAL_FILES))


def _path_candidates(text: str) -> list[str]:
    """The pieces of ``text`` that :data:`PATH_RE` can match in, giving the same matches in the
    same order as the whole text, at a fraction of the cost of scanning every character.

    A path holds no whitespace, and whitespace is neither a path character nor one the
    pattern's look-arounds refuse next to a path: each whitespace-separated word can be
    read alone. A word holding no "/", "." or backslash can only be a special file name,
    so the text is read whole when it names one anywhere.
    """
    if _SPECIAL_FILE.search(text):
        return [text]
    return [w for w in text.split() if "/" in w or "." in w or "\\" in w]


def find_paths(text: str) -> list[str]:
    """URLs, then paths, of a running text, in the order they appear (repeats kept).

    A URL is not also read as paths: its text is blanked before paths are looked for.
    """
    found: list[str] = []
    if "://" in text:   # every URL holds it: most texts need no URL scan at all
        for m in URL_RE.finditer(text):
            url = clean_url(m.group(0))
            if url:
                found.append(url)
    scrubbed = URL_RE.sub(" ", text) if found else text
    for piece in _path_candidates(scrubbed):
        for m in PATH_RE.finditer(piece):
            p = clean_path(m.group(0))
            if p:
                found.append(p)
    return found


def is_path(text: str) -> bool:
    """Whether ``text`` as a whole is a path (not whether it holds one)."""
    m = PATH_RE.fullmatch(text.rstrip(_TRAILING + "'\"`"))
    return m is not None and clean_path(m.group(0)) is not None

