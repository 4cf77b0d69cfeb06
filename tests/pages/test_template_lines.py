"""Templates stay readable: no line longer than the limit."""
from pathlib import Path

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"
MAX_LINE = 160


def test_no_template_line_is_longer_than_the_limit():
    long = [f"{path.relative_to(TEMPLATES)}:{n}: {len(line)} characters"
            for path in sorted(TEMPLATES.rglob("*.html"))
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if len(line) > MAX_LINE]
    assert not long, f"template lines over {MAX_LINE} characters:\n" + "\n".join(long)
