"""Turning files into documents: loaders per format, metadata from path rules, deterministic ids."""
