"""The OTLP/HTTP trace receiver (``POST /v1/traces``): ``views.py`` is the HTTP entry,
``wire.py`` reads and writes OTLP's two encodings; the folding is ``services/trace_ingest``."""
