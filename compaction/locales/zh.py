TEXTS = {
    "summary_open": "[对话摘要 #{number}]",
    "summary_intro": "本对话较早的部分（{evicted} 条消息）已由 {model} 压缩为以下摘要。请把它当作你对目前工作的记忆。",
    "summary_archive": ("原始消息已归档为条目 {archive_ref}；调用 session_load(handle=\"{archive_ref}\") 可重新读取，"
                        "或调用 session_search(query=...) 查找细节。"),
    "summary_extractive": "（此摘要由程序从消息中抽取，未使用大模型。）",
    "summary_skills": "之前加载的技能（原文保留）：",
    "summary_close": "[摘要结束]",
    "acknowledgement": "明白。我已获得之前对话的摘要，将从当前状态继续。",
    "preserved_truncated": "[……此前消息中省略了 {chars} 个字符……]",
}
