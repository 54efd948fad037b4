"""ragstead benchmarks: run on demand (`make bench` / `python -m bench all`), never in the test suite."""
