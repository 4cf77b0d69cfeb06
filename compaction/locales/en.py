TEXTS = {
    "summary_open": "[Conversation summary #{number}]",
    "summary_intro": ("Earlier parts of this conversation ({evicted} messages) were condensed into the summary "
                      "below by {model}. Treat it as your own memory of the work so far."),
    "summary_archive": ("The original messages are archived as entry {archive_ref}; call "
                        "session_load(handle=\"{archive_ref}\") to read them again, or session_search(query=...) to find a detail."),
    "summary_extractive": "(This summary was extracted from the messages without an LLM.)",
    "summary_skills": "Skills loaded earlier (kept verbatim):",
    "summary_close": "[End of summary]",
    "acknowledgement": "Understood. I have the summary of the earlier conversation and will continue from the current state.",
    "preserved_truncated": "[... {chars} characters of this earlier message omitted ...]",
}
