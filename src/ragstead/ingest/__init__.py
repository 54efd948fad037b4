"""Ingest: sources from outside the file system (web pages, PDFs, videos, posts, analytics rows) fetched,
extracted, archived under the project's private tree and indexed like any other file."""
