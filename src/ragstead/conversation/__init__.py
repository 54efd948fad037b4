"""Conversations: follow-up questions answered with the same scope and citations as `ask` (`kb.chat`).

`turns` holds the types (`Conversation`, `Turn`, `Rewrite`), `rewrite` the offline follow-up rule, `condense` the
LLM's condensing prompt, `history` the server's conversation store and `service` the `Conversations` service the
KnowledgeBase hands `chat` to.
"""
