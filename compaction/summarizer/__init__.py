"""Summary generation (owned by the summarizer work; see prompts.py for placeholders)."""
