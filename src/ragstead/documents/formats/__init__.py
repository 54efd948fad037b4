"""Readers of the formats people keep (e-books, slides, sheets, mail): each turns a file into labelled parts.

They sit under `documents.loaders` and never import it (no cycle): the registry there wraps each reader, runs
the zip check first, and joins the parts so every chunk cites its slide, sheet rows or message.
"""
