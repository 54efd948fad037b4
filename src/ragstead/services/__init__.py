"""The services under the facade, one module each, every one over the `Runtime` (runtime.py) of an open
project: indexing, freshness, watching, the push guard, landing files, health, snapshots, findability and
project setup. The machinery they drive lives in the packages named for pipeline stages."""
