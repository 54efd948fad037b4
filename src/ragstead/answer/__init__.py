"""Grounded answers with citations (`ragstead ask`)."""
